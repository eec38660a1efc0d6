"""One build recipe for the functions: template.yaml, functions/Makefile and the handler modules
agree, a build copies what a function needs, and no handler module shadows another module. The
layer carries the package without its development code, and every function cold-starts from it.

No database and no sam here: the pattern rule, and the layer's library target, are run with make
directly, as sam runs them (the layer's dependencies are pip's, and `sam build` installs them).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.deployed import ROOT, Stack, load_template, runtime_environment

FUNCTIONS = ROOT / "functions"
LAYER = ROOT / "layers" / "fairqueue"
TESTS = ROOT / "tests"
# What layers/fairqueue/Makefile leaves out of the package (its DEVELOPMENT_ONLY), as files.
DEVELOPMENT_ONLY = ("dev/", "cli/", "__main__.py", "queries/dev_upstream.sql")


def serverless_functions() -> dict[str, dict[str, object]]:
    resources = load_template()["Resources"]
    return {
        name: resource
        for name, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def handler_modules() -> set[str]:
    return {path.stem for path in FUNCTIONS.glob("*.py")}


def makefile_handlers() -> set[str]:
    text = (FUNCTIONS / "Makefile").read_text(encoding="utf-8")
    found = re.search(r"^HANDLERS := (.+)$", text, re.MULTILINE)
    assert found is not None
    return set(found[1].split())


def test_every_function_is_built_by_the_one_recipe() -> None:
    functions = serverless_functions()
    assert len(functions) == 6
    for logical_id, resource in functions.items():
        properties = resource["Properties"]
        assert isinstance(properties, dict)
        module = logical_id.removesuffix("Function").lower()
        assert properties["CodeUri"] == "functions", logical_id
        assert properties["Handler"] == f"{module}.handler", logical_id
        assert resource["Metadata"] == {"BuildMethod": "makefile"}, logical_id
        tree = ast.parse((FUNCTIONS / f"{module}.py").read_text(encoding="utf-8"))
        assert any(
            isinstance(node, ast.FunctionDef) and node.name == "handler" for node in tree.body
        ), f"functions/{module}.py has no handler"
    modules = {logical_id.removesuffix("Function").lower() for logical_id in functions}
    assert modules == handler_modules() == makefile_handlers()


@pytest.mark.parametrize("module", sorted(handler_modules()))
def test_no_handler_module_shadows_another(module: str) -> None:
    # Lambda puts the function's folder first on sys.path, before the layer and the runtime.
    assert module not in sys.stdlib_module_names
    assert importlib.util.find_spec(module) is None, f"{module!r} is also importable elsewhere"
    assert module != "fairqueue"


def test_a_build_copies_the_handler_and_the_shared_modules(tmp_path: Path) -> None:
    source = tmp_path / "functions"
    shutil.copytree(FUNCTIONS, source, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "stages.py").write_text("STAGES = []\n")
    (source / "my_stages.py").symlink_to(tmp_path / "stages.py")
    (source / "helper.py").write_text("X = 1\n")
    artifacts = tmp_path / "CronFunction"
    subprocess.run(
        ["make", "--makefile", str(source / "Makefile"), "build-CronFunction"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "ARTIFACTS_DIR": str(artifacts)},
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert sorted(p.name for p in artifacts.iterdir()) == ["cron.py", "helper.py", "my_stages.py"]
    assert not (artifacts / "my_stages.py").is_symlink()
    assert (artifacts / "cron.py").read_bytes() == (FUNCTIONS / "cron.py").read_bytes()


def test_a_function_without_a_handler_module_does_not_build(tmp_path: Path) -> None:
    built = subprocess.run(
        ["make", "--makefile", str(FUNCTIONS / "Makefile"), "build-NopeFunction"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "ARTIFACTS_DIR": str(tmp_path / "out")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert built.returncode != 0
    assert "no handler module for build-NopeFunction" in built.stderr
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def layer_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The layer's ``python/`` folder as the build leaves it, less the dependencies (the
    test's own interpreter has those)."""
    artifacts = tmp_path_factory.mktemp("FairqueueLayer")
    subprocess.run(
        ["make", "--makefile", str(LAYER / "Makefile"), "layer-library"],
        cwd=artifacts,
        env={"PATH": "/usr/bin:/bin", "ARTIFACTS_DIR": str(artifacts)},
        check=True,
        capture_output=True,
        timeout=60,
    )
    return artifacts / "python"


def package_files(package: Path) -> set[str]:
    """The package's files, through the source's ``sql`` link as the build copies it."""
    return {
        (Path(folder) / name).relative_to(package).as_posix()
        for folder, _, names in os.walk(package, followlinks=True)
        for name in names
        if "__pycache__" not in Path(folder).parts
    }


def test_the_layer_carries_the_package_without_its_development_code(layer_site: Path) -> None:
    source = package_files(LAYER / "fairqueue")
    shipped = package_files(layer_site / "fairqueue")
    development = {name for name in source if name.startswith(DEVELOPMENT_ONLY)}
    assert "dev/embedded.py" in development and "cli/__init__.py" in development
    assert shipped == source - development
    assert not (layer_site / "fairqueue" / "dev").exists()
    assert {path.name for path in layer_site.iterdir()} == {"fairqueue"}


def cold_start(
    layer_site: Path, logical_id: str, stages: str, **parameters: str
) -> dict[str, object]:
    """Import the function's handler module, as Lambda's cold start does, with the template's
    environment (``FAIRQUEUE_STAGES`` set to ``stages``, which the template itself may refuse)
    and only the layer's package: what it imported of the package, or its error."""
    stack = Stack(
        parameters={
            "DatabaseSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:db-Ab12Cd",
            "JwtIssuer": "https://issuer.example.com",
            "JwtAudience": "fairqueue-client",
            "StagesSpec": "support.deployed_stages:STAGES",
            # The operators' dashboard is deployed only with its secret.
            "DashboardSecret": "d" * 32,
            **parameters,
        },
        refs={
            "DoorbellQueue": "https://sqs.us-east-1.amazonaws.com/123456789012/doorbells",
            "DoorbellDeadLetterQueue": "https://sqs.us-east-1.amazonaws.com/123456789012/dlq",
        },
        attributes={
            ("DoorbellQueue", "QueueName"): "doorbells",
            ("DoorbellQueue", "Arn"): "arn:aws:sqs:us-east-1:123456789012:doorbells",
            ("DoorbellDeadLetterQueue", "Arn"): "arn:aws:sqs:us-east-1:123456789012:dlq",
        },
    )
    function = stack.function(logical_id)
    script = (
        "import importlib.util, json, sys\n"
        "import fairqueue\n"
        "report = {'package': fairqueue.__file__,"
        " 'dev': importlib.util.find_spec('fairqueue.dev') is not None}\n"
        "try:\n"
        "    spec = importlib.util.spec_from_file_location(sys.argv[1], sys.argv[2])\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "except Exception as exc:\n"
        "    report['error'] = f'{type(exc).__name__}: {exc}'\n"
        "report['modules'] = sorted(m for m in sys.modules if m.startswith('fairqueue'))\n"
        "print(json.dumps(report))\n"
    )
    started = subprocess.run(
        [sys.executable, "-c", script, function.handler_file.stem, str(function.handler_file)],
        cwd=function.handler_file.parent,
        env={
            "PATH": os.environ["PATH"],
            # The layer's package first, before the editable install of the source tree; the
            # tests' folder stands for the function's own code (its stage list).
            "PYTHONPATH": os.pathsep.join([str(layer_site), str(TESTS)]),
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            **runtime_environment(function),
            **function.environment,
            "FAIRQUEUE_STAGES": stages,
        },
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    report = json.loads(started.stdout.splitlines()[-1])
    assert isinstance(report, dict)
    return report


@pytest.mark.parametrize("logical_id", sorted(serverless_functions()))
def test_every_function_cold_starts_from_the_layer_without_the_development_code(
    layer_site: Path, logical_id: str
) -> None:
    report = cold_start(layer_site, logical_id, "support.deployed_stages:STAGES")
    assert report.get("error") is None, report["error"]
    assert report["package"] == str(layer_site / "fairqueue" / "__init__.py")
    assert report["dev"] is False
    modules = report["modules"]
    assert isinstance(modules, list)
    assert "fairqueue.roles.function" in modules
    assert [m for m in modules if m.startswith(("fairqueue.dev", "fairqueue.cli"))] == []


def test_a_function_naming_the_example_from_the_layer_says_it_is_development_code(
    layer_site: Path,
) -> None:
    """What a stack that got past the template's pattern (or a function deployed some other
    way) would meet."""
    report = cold_start(
        layer_site,
        "CronFunction",
        "fairqueue.dev.example:STAGES",
        UpstreamUrl="https://upstream.example.com",
    )
    assert report["error"] == (
        "ConfigurationError: 'fairqueue.dev.example:STAGES' needs fairqueue.dev, development"
        " code that the Lambda layer leaves out: set FAIRQUEUE_STAGES (StagesSpec) to your own"
        " stage list"
    )


def test_the_layer_outside_production_without_a_database_says_it_has_no_embedded_postgres(
    layer_site: Path,
) -> None:
    script = (
        "from fairqueue.db import resolve_dsn\n"
        "from fairqueue.errors import DatabaseUnavailable\n"
        "try:\n"
        "    resolve_dsn()\n"
        "except DatabaseUnavailable as exc:\n"
        "    print(exc)\n"
    )
    refused = subprocess.run(
        [sys.executable, "-c", script],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(layer_site)},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert refused.stdout == (
        "no DATABASE_URL, and no embedded Postgres in this install (fairqueue.dev is development"
        " code, left out of the Lambda layer): set DATABASE_URL\n"
    )
    assert refused.stderr == ""
