"""The database's doors as the library calls them.

Each door checks its arguments itself (sql/functions/door_argument.sql) and refuses a value past
its bounds with SQLSTATE 22023; a duration too large for an interval fails as another data
error. Either reaches the caller as ArgumentOutOfBounds with the door's message.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from .errors import ArgumentOutOfBounds


@contextmanager
def door_refusals() -> Iterator[None]:
    """A door's refusal of an argument, raised in this block, as ArgumentOutOfBounds."""
    try:
        yield
    except psycopg.DataError as exc:
        raise ArgumentOutOfBounds(str(exc.diag.message_primary)) from None
