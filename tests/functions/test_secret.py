"""The cron function finds its database in Secrets Manager, served by moto on loopback."""

import json
from pathlib import Path

import boto3
import pytest
from psycopg.conninfo import conninfo_to_dict

from fairqueue.dev.lambda_loop import LocalContext, load_module, scheduled_event
from fairqueue.errors import ConfigurationError
from fairqueue.roles.function import database_url, dsn_from_secret

pytest_plugins = ["support.moto_sqs"]  # the moto server on loopback

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def aws(monkeypatch, moto_server_url: str) -> str:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", moto_server_url)
    return moto_server_url


def test_the_cron_function_reads_its_database_url_from_the_secret(
    aws, dsn, conn, monkeypatch
) -> None:
    client = boto3.client("secretsmanager")
    arn = client.create_secret(Name="fairqueue/db-url", SecretString=dsn)["ARN"]
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("DATABASE_SECRET_ARN", arn)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "fairqueue")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "fairqueue-cron")
    app = load_module(ROOT / "functions/cron.py")
    try:
        answer = app.handler(scheduled_event(), LocalContext())
    finally:
        app.CONNECTION.close()
    assert answer["stopReason"] == "no_work"
    row = conn.execute("select id, trigger from fairqueue.runs").fetchone()
    assert (str(row["id"]), row["trigger"]) == (answer["runId"], "schedule")


def test_rds_style_json_secret_becomes_a_dsn() -> None:
    dsn = dsn_from_secret(
        json.dumps(
            {
                "host": "db.internal",
                "port": 6432,
                "username": "app",
                "password": "p@ss:/w",
                "dbname": "q",
            }
        )
    )
    parts = conninfo_to_dict(dsn)
    assert parts["host"] == "db.internal"
    assert parts["port"] == "6432"
    assert parts["user"] == "app"
    assert parts["password"] == "p@ss:/w"
    assert parts["dbname"] == "q"


def test_connection_string_secret_is_used_as_is() -> None:
    assert dsn_from_secret(" postgresql://u@h/d\n") == "postgresql://u@h/d"
    assert dsn_from_secret("host=h dbname=d") == "host=h dbname=d"


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ("not a url", "neither a connection string nor a JSON object"),
        ("{oops", "not valid JSON"),
        ("[1, 2]", "must be an object"),
        ('{"host": "h"}', "lacks username, password"),
    ],
)
def test_malformed_secret_is_a_clear_error(secret: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        dsn_from_secret(secret)


def test_the_proxy_endpoint_replaces_the_secrets_host_only(aws, monkeypatch) -> None:
    secret = {"host": "db.internal", "port": 5432, "username": "app", "password": "pw"}
    client = boto3.client("secretsmanager")
    arn = client.create_secret(Name="fairqueue/db-proxied", SecretString=json.dumps(secret))["ARN"]
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("DATABASE_SECRET_ARN", arn)
    monkeypatch.setenv("FAIRQUEUE_DATABASE_HOST", "proxy.internal")
    parts = conninfo_to_dict(database_url())
    assert (parts["host"], parts["port"], parts["user"]) == ("proxy.internal", "5432", "app")
    assert parts["sslmode"] == "require"
