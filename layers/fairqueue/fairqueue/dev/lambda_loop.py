"""Running the cron handler on this machine exactly as Lambda would call it."""

from __future__ import annotations

import importlib.util
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import ConfigurationError
from ..validation import shown_value

LAMBDA_TIMEOUT_S = 300.0

Handler = Callable[[dict[str, Any], Any], Any]


class LocalContext:
    """A Lambda context whose remaining time is real: it counts down from the timeout."""

    def __init__(self, timeout_s: float = LAMBDA_TIMEOUT_S, function_name: str = "fairqueue-cron"):
        self._deadline = time.monotonic() + timeout_s
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.aws_request_id = str(uuid.uuid4())
        self.invoked_function_arn = f"arn:aws:lambda:local:000000000000:function:{function_name}"
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return max(int((self._deadline - time.monotonic()) * 1000), 0)


def scheduled_event(
    schedule_arn: str = "arn:aws:scheduler:local:000000000000:schedule/default/fairqueue-cron",
) -> dict[str, Any]:
    """The input EventBridge Scheduler sends the cron function (see template.yaml)."""
    return {
        "source": "fairqueue.schedule",
        "executionId": str(uuid.uuid4()),
        "scheduledTime": datetime.now(UTC)
        .replace(microsecond=0)
        .isoformat()
        .replace("+00:00", "Z"),
        "scheduleArn": schedule_arn,
    }


def load_module(path: Path) -> ModuleType:
    """A function's handler file, loaded as a module the way the Lambda runtime imports it."""
    if not path.is_file():
        raise ConfigurationError(f"no handler file at {path}")
    module_spec = importlib.util.spec_from_file_location(f"fairqueue_local_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise ConfigurationError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def load_handler(spec: str) -> Handler:
    """A handler named ``path/to/module.py:attribute`` (``functions/cron.py:handler``)."""
    path_text, sep, attribute = spec.rpartition(":")
    if not sep or not path_text or not attribute:
        raise ConfigurationError(
            f"--handler must look like functions/cron.py:handler, got {shown_value(spec)}"
        )
    path = Path(path_text)
    handler = getattr(load_module(path), attribute, None)
    if not callable(handler):
        raise ConfigurationError(f"{path} has no callable {attribute!r}")
    return handler  # type: ignore[no-any-return]
