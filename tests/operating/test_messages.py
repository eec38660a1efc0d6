"""Messages made from pydantic's validation errors: one line each, naming the field and the
value, without the library's documentation links or its ``''``."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError

from fairqueue import InvalidPayload, Stage, enqueue
from fairqueue.cli import main
from fairqueue.db import Connection
from fairqueue.dev.lambda_loop import load_handler
from fairqueue.errors import ConfigurationError
from fairqueue.roles.function import ScheduledEvent
from fairqueue.validation import problems, shown_value

BOILERPLATE = ("errors.pydantic.dev", "For further information", "[type=", "\n")


class Page(BaseModel):
    url: str = Field(min_length=1)
    pages: int = Field(ge=1, le=500)


PAGED = Stage("messages_page", handler=lambda job: None, payload_model=Page)


def clean(message: str) -> str:
    for boilerplate in BOILERPLATE:
        assert boilerplate not in message, message
    return message


def test_a_payload_that_misfits_its_model_names_each_field_in_one_line(conn: Connection) -> None:
    with pytest.raises(InvalidPayload) as caught:
        enqueue(conn, PAGED.name, {"url": "", "pages": 900})
    assert clean(str(caught.value)) == (
        "messages_page: payload does not fit the stage's model:"
        " url: String should have at least 1 character, got an empty value;"
        " pages: Input should be less than or equal to 500, got 900"
    )


def test_a_missing_field_is_said_missing() -> None:
    with pytest.raises(ValidationError) as caught:
        Page.model_validate({"pages": 2})
    assert clean(problems(caught.value)) == "url is missing"


def test_a_malformed_scheduled_event_is_one_line() -> None:
    with pytest.raises(ConfigurationError) as caught:
        ScheduledEvent.parse({"time_budget_s": "soon"})
    assert clean(str(caught.value)).startswith(
        "the scheduled event is malformed: time_budget_s: Input should be a valid number"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["enqueue", "messages_page", "{}", "--tenant", ""], "tenant"),
        (["enqueue", "messages_page", '{"url": "", "pages": 1}'], "got an empty value"),
    ],
)
def test_an_empty_value_is_said_empty_not_quoted(
    dsn: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["--database-url", dsn, *argv]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert message in clean(line)
    assert "''" not in line


def test_a_handler_spec_left_empty_is_said_empty() -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_handler("")
    assert clean(str(caught.value)).endswith("got an empty value")
    assert shown_value("x" * 200).endswith("...") and len(shown_value("x" * 200)) == 80
