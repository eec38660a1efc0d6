"""A schedule: recurring work of one job type, declared in code (``FAIRQUEUE_SCHEDULES``) or
made at run time for a tenant (``fairqueue.schedules.add_schedule``); each tick becomes an
ordinary job of its type (docs/guide/schedules.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..inputs import check_label
from ..jobs import prepare
from .ticks import CatchUp, Rule, catch_up_of, rule_of


@dataclass(frozen=True)
class Schedule:
    """``job_type`` once per tick: exactly one of ``cron`` (five fields, read in ``timezone``)
    and ``every`` (a timedelta of a minute or more). Each tick's job carries ``payload``,
    ``tenant_id`` and ``group_id``; ticks missed while no sweep ran follow ``catch_up``
    (``"none"``, ``"one"`` or ``"all"``). A rule that cannot be kept is InvalidSchedule when the
    Schedule is made; the job type and payload are checked against the stages when it is used
    (``definition``), so a Schedule may be declared before its stage."""

    name: str
    job_type: str
    cron: str | None = field(default=None, kw_only=True)
    every: timedelta | None = field(default=None, kw_only=True)
    timezone: str = field(default="UTC", kw_only=True)
    payload: dict[str, Any] | None = field(default=None, kw_only=True)
    tenant_id: str | None = field(default=None, kw_only=True)
    group_id: str | None = field(default=None, kw_only=True)
    catch_up: CatchUp = field(default="one", kw_only=True)

    def __post_init__(self) -> None:
        check_label("schedule name", self.name, required=True)
        check_label(f"schedule {self.name!r}: job_type", self.job_type, required=True)
        check_label(f"schedule {self.name!r}: tenant_id", self.tenant_id)
        self.rule()
        catch_up_of(self.catch_up)

    def rule(self) -> Rule:
        return rule_of(self.cron, self.every, self.timezone)

    def definition(self) -> Definition:
        """What is stored of the schedule, its job checked as ``enqueue`` checks one: an
        unknown type is UnknownJobType, a payload its stage refuses InvalidPayload."""
        job = prepare(
            self.job_type,
            {} if self.payload is None else self.payload,
            tenant_id=self.tenant_id,
            group_id=self.group_id,
        )
        return Definition(
            name=self.name,
            job_type=self.job_type,
            rule=self.rule(),
            payload_json=job.payload_json,
            tenant_id=self.tenant_id,
            group_id=self.group_id,
            max_attempts=job.max_attempts,
            catch_up=catch_up_of(self.catch_up),
        )


@dataclass(frozen=True)
class Definition:
    """A schedule checked and ready to store."""

    name: str
    job_type: str
    rule: Rule
    payload_json: str
    tenant_id: str | None
    group_id: str | None
    max_attempts: int
    catch_up: CatchUp

    def columns(self) -> dict[str, Any]:
        """The schedule's columns, as the doors take them (less its next tick)."""
        return {
            "tenant_id": self.tenant_id,
            "name": self.name,
            "job_type": self.job_type,
            "cron": self.rule.cron,
            "every_s": self.rule.every_s,
            "timezone": self.rule.timezone,
            "payload": self.payload_json,
            "group_id": self.group_id,
            "max_attempts": self.max_attempts,
            "catch_up": self.catch_up,
        }
