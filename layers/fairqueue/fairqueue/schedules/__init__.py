"""Schedules: recurring work of a job type, each tick an ordinary job made once.

- ``schedule``: ``Schedule``, declared in code (``FAIRQUEUE_SCHEDULES``) or made at run time;
- ``ticks``: when a rule ticks (cron in a timezone, or every so often) and which due ticks a
  sweep makes (``catch_up``);
- ``stored``: a tenant's schedules in the database, under its clamp: add, pause, resume,
  remove, read.

The sweep that makes the ticks is the sweeper's (``fairqueue.roles.scheduling``).
"""

from .schedule import Schedule
from .stored import (
    ScheduleInfo,
    add_schedule,
    database_now,
    find_schedules,
    get_schedule,
    list_schedules,
    pause_schedule,
    remove_schedule,
    resume_schedule,
    schedule_of_job,
)

__all__ = [
    "Schedule",
    "ScheduleInfo",
    "add_schedule",
    "database_now",
    "find_schedules",
    "get_schedule",
    "list_schedules",
    "pause_schedule",
    "remove_schedule",
    "resume_schedule",
    "schedule_of_job",
]
