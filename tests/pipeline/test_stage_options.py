"""Stage options: each is stated as a constraint on its field, and a Stage that breaks one is a
ConfigurationError naming the stage and the option. No database: these are checked at creation.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fairqueue import ConfigurationError, Job, Stage
from fairqueue.upstream import InProcessUpstream

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "writing-stages.md"


def handler(job: Job) -> None:
    return None


class Payload(BaseModel):
    doc: str


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": ""}, "name must be a non-empty string"),
        ({"name": "   "}, "name must be a non-empty string"),
        ({"handler": None}, "handler must be callable, got None"),
        ({"batch": 0}, "batch must be from 1 to 1000, got 0"),
        ({"batch": True}, "batch must be a whole number, got True"),
        ({"batch": "5"}, "batch must be a whole number, got '5'"),
        ({"concurrency": 0}, "concurrency must be at least 1, got 0"),
        ({"max_attempts": 1001}, "max_attempts must be from 1 to 1000, got 1001"),
        ({"payload_model": dict}, "payload_model must be a subclass of BaseModel or None"),
        ({"lease_s": 0}, "lease_s must be over 0 and at most 86400, got 0"),
        ({"lease_s": 90_000}, "lease_s must be over 0 and at most 86400, got 90000"),
        ({"backoff_unit_s": -1}, "backoff_unit_s must be positive, got -1"),
        ({"job_timeout_s": 0}, "job_timeout_s must be positive, got 0"),
        ({"job_timeout_s": "soon"}, "job_timeout_s must be a number, got 'soon'"),
        ({"on_give_up": "refund"}, "on_give_up must be callable or None, got 'refund'"),
        ({"delivery": "pigeon"}, "delivery must be 'cron' or 'doorbell', got 'pigeon'"),
        ({"credit_cost": -1}, "credit_cost must be at least 0, got -1"),
        ({"credit_cost": 1.5}, "credit_cost must be a whole number, got 1.5"),
        ({"credit_cost": False}, "credit_cost must be a whole number, got False"),
        ({"release_window_s": 0}, "release_window_s must be positive, got 0"),
        ({"release_backoff_s": 0}, "release_backoff_s must be positive, got 0"),
        ({"release_backoff_cap_s": -5}, "release_backoff_cap_s must be positive, got -5"),
        ({"render_result": 3}, "render_result must be callable or None, got 3"),
        ({"after_result": "x"}, "after_result must be callable or None, got 'x'"),
        ({"quantum": 0}, "quantum must be from 1 to 1000, got 0"),
        ({"quantum": 1001}, "quantum must be from 1 to 1000, got 1001"),
        ({"quantum": 2.5}, "quantum must be a whole number, got 2.5"),
    ],
)
def test_a_bad_option_names_the_stage_and_the_option(options: dict[str, Any], message: str) -> None:
    given: dict[str, Any] = {"name": "odd", "handler": handler, **options}
    with pytest.raises(ConfigurationError, match=re.escape(message)) as caught:
        Stage(**given)
    assert str(caught.value).startswith(f"Stage {given['name']!r}: ")


def test_every_bad_option_is_named_at_once() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Stage("odd", handler=handler, batch=0, lease_s=0, delivery="pigeon")  # type: ignore[arg-type]
    text = str(caught.value)
    assert text.count(";") == 2
    assert all(option in text for option in ("batch", "lease_s", "delivery"))


def test_good_options_are_kept_as_given() -> None:
    upstream = InProcessUpstream()
    stage = Stage(
        "fine_options",
        handler=handler,
        batch=1000,
        concurrency=4,
        max_attempts=1,
        payload_model=Payload,
        lease_s=86_400,
        backoff_unit_s=0.5,
        job_timeout_s=2,
        quota="search_api",
        delivery="doorbell",
        credit_cost=5,
        upstream=upstream,
        clients_may_admit=True,
    )
    # Nothing is coerced: the attributes are the values given.
    assert stage.lease_s == 86_400 and isinstance(stage.lease_s, int)
    assert stage.job_timeout_s == 2 and stage.upstream is upstream
    assert stage.payload_model is Payload and stage.batch_seconds() == 500


def test_the_signature_and_defaults_are_the_documented_ones() -> None:
    parameters = list(inspect.signature(Stage).parameters)
    assert parameters[:2] == ["name", "handler"]
    defaults = {f.name: f.default for f in dataclasses.fields(Stage)}
    text = GUIDE.read_text(encoding="utf-8")
    table = text.split("`Stage` options:", 1)[1].split("\n\n", 2)[1]
    documented = {}
    for line in table.splitlines()[2:]:
        option, default = (cell.strip() for cell in line.strip("|").split("|")[:2])
        documented[option.strip("`")] = default.strip("`")
    assert set(documented) <= set(defaults)
    for option, default in documented.items():
        value = defaults[option]
        if value is None:
            expected = "none"
        elif isinstance(value, str):
            expected = value
        else:
            expected = f"{value:g}"
        assert default == expected, option
