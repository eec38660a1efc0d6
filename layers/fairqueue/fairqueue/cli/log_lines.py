"""JSON log lines for the long-running commands, in the shape the functions' Powertools logs
have, on stderr so that a command's own output on stdout stays clean."""

from __future__ import annotations

import functools
import logging
import sys
from typing import TextIO

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

from ..roles.function import LIBRARY_LOGGER


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of each line."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


@functools.cache
def _service_logger(service: str) -> Logger:
    # Powertools keeps one logger per service name and does not set a second one up: a command
    # run twice in one process (the tests) reuses the first.
    return Logger(service=service, logger_handler=_Stderr())


def json_logs(service: str) -> Logger:
    """Send the library's log lines (runs opened and closed, API requests, warnings) through a
    Powertools logger writing JSON to stderr; the level is Powertools' own setting
    (``POWERTOOLS_LOG_LEVEL``, INFO by default)."""
    logger = _service_logger(service)
    logging.getLogger(LIBRARY_LOGGER)  # registered before it is configured
    copy_config_to_registered_loggers(source_logger=logger, include={LIBRARY_LOGGER})
    logger.append_keys(name="%(name)s")
    return logger
