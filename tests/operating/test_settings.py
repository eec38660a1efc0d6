"""One settings object: every variable the library reads, typed, documented, checked.

No database here: these are the settings' own rules, and the table in the configuration guide
that lists them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from fairqueue.errors import ConfigurationError
from fairqueue.roles.function import load_stages
from fairqueue.settings import Settings, settings
from support import serve_stages

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "configuration.md"
ROW = re.compile(r"^\|\s*`(?P<variable>[A-Z0-9_]+)`\s*\|\s*(?P<default>[^|]*?)\s*\|")


def guide_table() -> dict[str, str]:
    """The guide's table of variables: variable -> its default cell."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("\n## The variables\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            assert match["variable"] not in rows, f"{match['variable']} is listed twice"
            rows[match["variable"]] = match["default"]
    return rows


def shown(default: Any) -> str:
    """A field's default as the table writes it."""
    if default is None:
        return "none"
    if isinstance(default, float) and default.is_integer():
        default = int(default)
    return f"`{default}`"


def test_the_guide_table_lists_exactly_the_settings_and_their_defaults() -> None:
    table = guide_table()
    fields = {
        str(info.validation_alias): shown(info.default) for info in Settings.model_fields.values()
    }
    assert sorted(table) == sorted(fields)
    assert table == fields


def test_every_field_says_what_it_is_and_names_its_variable() -> None:
    for name, info in Settings.model_fields.items():
        assert info.description, f"{name} has no description"
        assert isinstance(info.validation_alias, str), f"{name} names no variable"


def test_defaults_without_any_variable() -> None:
    config = Settings.from_mapping({})
    assert config.max_payload_bytes == 1024 * 1024
    assert config.doorbells is None
    assert config.stages == "fairqueue.dev.example:STAGES"
    assert config.api_pool_size == 10
    assert not config.production


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("FAIRQUEUE_MAX_PAYLOAD_BYTES", "lots", "FAIRQUEUE_MAX_PAYLOAD_BYTES must be a whole"),
        ("FAIRQUEUE_MAX_PAYLOAD_BYTES", "0", "FAIRQUEUE_MAX_PAYLOAD_BYTES must be at least 1"),
        ("FAIRQUEUE_DOORBELLS", "kafka", "FAIRQUEUE_DOORBELLS='kafka' is not one of: sqs"),
        ("FAIRQUEUE_ROLE", "chef", "FAIRQUEUE_ROLE='chef' is not one of: cron, worker"),
        ("FAIRQUEUE_STAGES", "no_colon", "FAIRQUEUE_STAGES must look like module:attribute"),
        ("FAIRQUEUE_UPSTREAM_TIMEOUT_S", "soon", "FAIRQUEUE_UPSTREAM_TIMEOUT_S must be a number"),
        ("FAIRQUEUE_RESULT_GRACE_S", "-1", "FAIRQUEUE_RESULT_GRACE_S must be at least 0.001"),
        ("FAIRQUEUE_RESULT_BATCH", "10001", "FAIRQUEUE_RESULT_BATCH must be at most 10000"),
        ("FAIRQUEUE_API_PORT", "70000", "FAIRQUEUE_API_PORT must be at most 65535"),
        ("FAIRQUEUE_API_POOL_SIZE", "0", "FAIRQUEUE_API_POOL_SIZE must be at least 1"),
    ],
)
def test_a_bad_value_is_a_configuration_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)) as caught:
        Settings.from_mapping({variable: value})
    assert not isinstance(caught.value.__cause__, ValidationError)
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        settings()


def test_every_bad_variable_is_named_at_once() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_mapping({"FAIRQUEUE_RESULT_BATCH": "x", "FAIRQUEUE_API_PORT": "y"})
    assert "FAIRQUEUE_RESULT_BATCH" in str(caught.value)
    assert "FAIRQUEUE_API_PORT" in str(caught.value)


def test_the_environment_is_read_at_the_point_of_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRQUEUE_RESULT_BATCH", "7")
    assert settings().result_batch == 7
    monkeypatch.setenv("FAIRQUEUE_RESULT_BATCH", "8")
    assert settings().result_batch == 8
    monkeypatch.delenv("FAIRQUEUE_RESULT_BATCH")
    assert settings().result_batch == 100


def test_an_empty_value_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRQUEUE_DOORBELLS", "")
    monkeypatch.setenv("FAIRQUEUE_MAX_PAYLOAD_BYTES", "")
    assert settings().doorbells is None
    assert settings().max_payload_bytes == 1024 * 1024
    assert Settings.from_mapping({"FAIRQUEUE_STAGES": ""}).stages == "fairqueue.dev.example:STAGES"


def test_a_mapping_is_read_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRQUEUE_RESULT_BATCH", "7")
    assert Settings.from_mapping({}).result_batch == 100
    assert Settings.from_mapping({"FAIRQUEUE_RESULT_BATCH": "3"}).result_batch == 3


def test_production_is_one_value(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.from_mapping({"FAIRQUEUE_ENV": "production"}).production
    assert not Settings.from_mapping({"FAIRQUEUE_ENV": "staging"}).production


def test_an_error_never_repeats_a_secret() -> None:
    # No secret field can fail today; the phrase that would describe one still hides it.
    from fairqueue.settings import _problem

    for variable in ("DATABASE_URL", "FAIRQUEUE_UPSTREAM_TOKEN", "FAIRQUEUE_API_SECRET"):
        error: Any = {"loc": (variable,), "input": "hunter2", "type": "too_short", "msg": "m"}
        assert "hunter2" not in _problem(error)
        assert variable in _problem(error)


def test_secrets_are_not_shown() -> None:
    config = Settings.from_mapping({"FAIRQUEUE_UPSTREAM_TOKEN": "hunter2" * 5})
    assert "hunter2" not in repr(config)
    assert config.upstream_token is not None
    assert config.upstream_token.get_secret_value() == "hunter2" * 5


def test_production_without_a_stage_list_names_fairqueue_stages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FAIRQUEUE_STAGES", raising=False)
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    with pytest.raises(
        ConfigurationError, match=r"^FAIRQUEUE_ENV=production needs FAIRQUEUE_STAGES"
    ):
        load_stages()
    monkeypatch.setenv("FAIRQUEUE_STAGES", "support.serve_stages:STAGES")
    assert [stage.name for stage in load_stages()] == [stage.name for stage in serve_stages.STAGES]
    monkeypatch.delenv("FAIRQUEUE_ENV")
    monkeypatch.delenv("FAIRQUEUE_STAGES")
    assert load_stages()  # outside production, the example
