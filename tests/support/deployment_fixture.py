"""The ``deployment`` fixture (tests/deployment.py), as a plugin a test module names:
``pytest_plugins = ["support.moto_sqs", "support.deployment_fixture"]``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support import deployed_stages
from support.deployment import Deployment


@pytest.fixture
def deployment(production_dsn: str, moto_server_url: str, tmp_path: Path) -> Iterator[Deployment]:
    deployed_stages.reset()
    stood_up = Deployment(production_dsn, moto_server_url, tmp_path)
    yield stood_up
    stood_up.close()
