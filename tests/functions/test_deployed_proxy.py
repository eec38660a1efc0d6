"""The stack with its RDS Proxy (DatabasePooler=rds-proxy): every function connects through the
proxy's endpoint with the secret's login and port, telling the library a transaction pooler is
in front. The proxy's stand-in is a PgBouncer in transaction mode (fairqueue.dev.pooler)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo

from fairqueue import enqueue
from fairqueue.db import Connection
from fairqueue.dev import pooler as local_pooler
from support import deployed_stages  # noqa: F401 - declares summarize for enqueue
from support.deployment import FUNCTIONS, Deployment
from support.rows import job, runs

pytest_plugins = ["support.moto_sqs", "support.deployment_fixture"]

ROOT = Path(__file__).resolve().parents[2]
WITH_PROXY = {
    "DatabasePooler": "rds-proxy",
    "DatabaseInstanceId": "fairqueue-db",
    "SubnetIds": "subnet-0123456789abcdef0",
    "SecurityGroupIds": "sg-0123456789abcdef0",
}


@pytest.mark.timeout(30)
def test_with_the_proxy_every_function_connects_to_its_endpoint_as_pooled(
    deployment: Deployment,
) -> None:
    with_proxy = deployment.stack(**WITH_PROXY)
    without = deployment.stack()
    for logical_id in FUNCTIONS:
        environment = with_proxy.function(logical_id).environment
        assert environment["FAIRQUEUE_DATABASE_HOST"] == deployment.proxy_endpoint
        assert environment["FAIRQUEUE_POOLER"] == "transaction"
        plain = without.function(logical_id).environment
        assert "FAIRQUEUE_DATABASE_HOST" not in plain and "FAIRQUEUE_POOLER" not in plain


@pytest.fixture(scope="module")
def proxy(server_dsn: str) -> Iterator[tuple[str, int]]:
    """PgBouncer in transaction mode, standing in for the RDS Proxy."""
    reason = local_pooler.why_not(server_dsn)
    if reason is not None:
        pytest.skip(f"no stand-in for the RDS Proxy: {reason}")
    local_pooler.create_login(server_dsn)
    with local_pooler.pgbouncer(server_dsn) as address:
        yield address


@pytest.mark.timeout(60)
def test_the_cron_function_drains_through_the_proxy(
    deployment: Deployment, admin_dsn: str, conn: Connection, proxy: tuple[str, int]
) -> None:
    host, port = proxy
    # The secret names the database itself, as an RDS secret does; the proxy listens on the
    # same port, and the function is told its endpoint.
    secret = make_conninfo(
        admin_dsn, host="database.invalid", port=port, user=local_pooler.POOLED_LOGIN
    )
    secret_arn = deployment.secret(secret)
    deployment.proxy_endpoint = host
    job_id = enqueue(conn, "summarize", {"doc": "d", "result": 1, "credits": 2}, tenant_id="t")
    cron = deployment.start("CronFunction", DatabaseSecretArn=secret_arn, **WITH_PROXY)

    ran = deployment.invoke(cron, deployment.tick("CronFunction"))

    assert ran.answer["stopReason"] == "no_work", ran.logs
    assert ran.answer["jobsDone"] == 1
    assert job(conn, job_id)["status"] == "done"
    (row,) = runs(conn)
    assert str(row["id"]) == ran.answer["runId"]
    # The secret's host does not resolve: the run went to the endpoint, whose PgBouncer still
    # holds the pooled login's server connection.
    seen = conn.execute(
        "select count(*) as n from pg_stat_activity"
        " where datname = current_database() and usename = %s",
        (local_pooler.POOLED_LOGIN,),
    ).fetchone()
    assert seen is not None and seen["n"] >= 1


@pytest.mark.timeout(120)
def test_the_template_lints_and_validates_with_the_proxy_on(tmp_path: Path) -> None:
    # cfn-lint resolves parameters from their defaults: a copy whose defaults turn the proxy on.
    text = (ROOT / "template.yaml").read_text()
    defaults = {
        "DatabasePooler": ("Default: none", "Default: rds-proxy"),
        "DatabaseInstanceId": ('Default: ""', "Default: fairqueue-db"),
        "SubnetIds": ('Default: ""', "Default: subnet-0123456789abcdef0"),
        "SecurityGroupIds": ('Default: ""', "Default: sg-0123456789abcdef0"),
    }
    for name, (old, new) in defaults.items():
        # Within the parameter's own lines, which are indented deeper than its name.
        within = re.compile(rf"(\n  {name}:\n(?:    .*\n)*?    ){re.escape(old)}")
        text, replaced = within.subn(lambda found, new=new: found.group(1) + new, text, count=1)
        assert replaced == 1, f"no {old!r} under parameter {name}"
    copy = tmp_path / "template.yaml"
    copy.write_text(text)
    tools = Path(sys.executable).parent
    for command in (
        [str(tools / "cfn-lint"), str(copy)],
        [str(tools / "sam"), "validate", "--lint", "--template", str(copy)],
    ):
        linted = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=50,
            check=False,
            env={**os.environ, "SAM_CLI_TELEMETRY": "0"},
            cwd=tmp_path,
        )
        assert linted.returncode == 0, linted.stdout + linted.stderr
