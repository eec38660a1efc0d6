"""When a schedule's ticks fall, and which of the due ones a sweep makes.

A cron rule is read by cronsim in the schedule's timezone (zoneinfo), so that its ticks follow
the wall clock across daylight-saving changes: a time the clocks skip runs once when they jump
past it, a time they pass twice runs once, the first time (cronsim's rule, Debian cron's). An
``every`` rule ticks at the whole multiples of its interval since 1970-01-01 UTC, so an hourly
one ticks on the hour whatever its timezone. Times handed out are UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal, cast, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ..errors import InvalidSchedule
from ..inputs import MAX_DELAY
from ..validation import shown_value

CatchUp = Literal["none", "one", "all"]
CATCH_UPS: Final = get_args(CatchUp)

MAX_CATCH_UP: Final = 100
"""The most ticks ``catch_up="all"`` makes of one schedule in one sweep: the latest ones; older
missed ticks are skipped."""

ON_TIME: Final = timedelta(minutes=5)
"""How late a due tick may be found and still count as on time for ``catch_up="none"``: the
sweeper runs every minute, and an invocation may start late."""

MIN_EVERY: Final = timedelta(minutes=1)
_SECOND: Final = timedelta(seconds=1)


@dataclass(frozen=True)
class Rule:
    """When a schedule ticks: exactly one of a five-field cron expression read in ``timezone``
    and an interval of whole seconds."""

    cron: str | None
    every_s: int | None
    timezone: str

    def next_after(self, moment: datetime) -> datetime:
        """The first tick strictly after ``moment``."""
        if self.every_s is not None:
            whole = int(moment.timestamp()) // self.every_s
            return datetime.fromtimestamp((whole + 1) * self.every_s, UTC)
        assert self.cron is not None
        local = moment.astimezone(ZoneInfo(self.timezone))
        return next(CronSim(self.cron, local)).astimezone(UTC)

    def latest(self, earliest: datetime, now: datetime, most: int) -> list[datetime]:
        """Up to ``most`` of the ticks from ``earliest`` to ``now``, both included: the latest
        ones, oldest first. Counted back from now, so a long gap costs no more than ``most``."""
        found: list[datetime] = []
        if self.every_s is not None:
            tick = int(now.timestamp()) // self.every_s * self.every_s
            while len(found) < most:
                at = datetime.fromtimestamp(tick, UTC)
                if at < earliest:
                    break
                found.append(at)
                tick -= self.every_s
        else:
            assert self.cron is not None
            # Counting back from a second past now's whole second includes a tick at now.
            start = now.replace(microsecond=0).astimezone(ZoneInfo(self.timezone)) + _SECOND
            for local in CronSim(self.cron, start, reverse=True):
                at = local.astimezone(UTC)
                if at < earliest or len(found) >= most:
                    break
                found.append(at)
        found.reverse()
        return found


def rule_of(cron: object, every: object, timezone: object) -> Rule:
    """The rule these arguments give, or InvalidSchedule naming what is wrong."""
    if not isinstance(timezone, str) or not timezone:
        raise InvalidSchedule(f"timezone must be an IANA name, got {shown_value(timezone)}")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(f"unknown timezone {timezone!r}") from None
    if (cron is None) == (every is None):
        raise InvalidSchedule("give exactly one of cron and every")
    if every is not None:
        return Rule(cron=None, every_s=_every_seconds(every), timezone=timezone)
    return Rule(cron=_checked_cron(cron), every_s=None, timezone=timezone)


def _every_seconds(every: object) -> int:
    if not isinstance(every, timedelta):
        raise InvalidSchedule(f"every must be a timedelta, got {shown_value(every)}")
    if every < MIN_EVERY:
        raise InvalidSchedule(f"every must be a minute or more, got {every}")
    if every > MAX_DELAY:
        raise InvalidSchedule(f"every may be at most {MAX_DELAY.days} days, got {every}")
    if every % _SECOND:
        raise InvalidSchedule(f"every must be whole seconds, got {every}")
    return every // _SECOND


def _checked_cron(cron: object) -> str:
    if not isinstance(cron, str):
        raise InvalidSchedule(f"cron must be a string, got {shown_value(cron)}")
    if len(cron.split()) != 5:
        raise InvalidSchedule(
            f"cron {cron!r} does not parse: it needs five fields (minute hour day month weekday)"
        )
    try:
        # The first tick too: an expression can parse and never come due (30 February).
        next(CronSim(cron, datetime.now(UTC)))
    except (CronSimError, StopIteration) as exc:
        raise InvalidSchedule(f"cron {cron!r} does not parse: {exc or 'it never ticks'}") from None
    return cron


def catch_up_of(value: object) -> CatchUp:
    if value not in CATCH_UPS:
        raise InvalidSchedule(
            f"catch_up must be one of {', '.join(CATCH_UPS)}, got {shown_value(value)}"
        )
    return cast(CatchUp, value)


def ticks_to_make(
    rule: Rule, next_tick_at: datetime, now: datetime, catch_up: CatchUp, on_time: timedelta
) -> list[datetime]:
    """Which of the ticks due from ``next_tick_at`` to ``now`` become jobs: ``all`` the latest
    MAX_CATCH_UP of them; ``one`` the latest alone, one job for every tick missed; ``none``
    the latest only when it is no more than ``on_time`` late, none of those missed."""
    if catch_up == "all":
        return rule.latest(next_tick_at, now, MAX_CATCH_UP)
    latest = rule.latest(next_tick_at, now, 1)
    if catch_up == "none" and latest and now - latest[0] > on_time:
        return []
    return latest
