"""One build recipe for the functions: template.yaml, functions/Makefile and the handler modules
agree, a build copies what a function needs, and no handler module shadows another module.

No database and no sam here: the pattern rule is run with make directly, as sam runs it.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.deployed import ROOT, load_template

FUNCTIONS = ROOT / "functions"


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
    assert len(functions) == 5
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
