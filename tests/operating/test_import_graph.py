"""The package's modules import each other without a circle.

Every import counts: at module level, inside ``if TYPE_CHECKING:`` and inside functions. A
circle hidden in a function is still a circle; it only moves the failure to the first call.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fairqueue

PACKAGE = Path(fairqueue.__file__).parent
MODULES = frozenset(path.stem for path in PACKAGE.glob("*.py"))


def imported_modules(source: str) -> set[str]:
    """The package's modules that a module's source imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "fairqueue" and len(parts) > 1:
                    found.add(parts[1])
        elif isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".") if node.module else []
            if node.level == 1:
                # from .x import y, or from . import x, y
                found.update(parts[:1] if parts else (alias.name for alias in node.names))
            elif node.level == 0 and parts and parts[0] == "fairqueue":
                found.update(parts[1:2] if len(parts) > 1 else (a.name for a in node.names))
    return found & MODULES


def import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.glob("*.py")):
        graph[path.stem] = imported_modules(path.read_text(encoding="utf-8")) - {path.stem}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One path for each circle found by a depth-first walk (each closing edge once)."""
    found: list[list[str]] = []
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> None:
        for target in sorted(graph[module]):
            if target in path:
                found.append([*path[path.index(target) :], target])
            elif target not in done:
                walk(target, [*path, target])
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            walk(module, [module])
    return found


def test_the_walk_sees_every_kind_of_import() -> None:
    source = (
        "from . import claim, jobs\n"
        "from .stage import Stage\n"
        "import fairqueue.db\n"
        "from fairqueue.errors import ConfigurationError\n"
        "from fairqueue import ringing\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from .results import Result\n"
        "def late():\n"
        "    from .lanes import admit\n"
    )
    assert imported_modules(source) == {
        "claim",
        "jobs",
        "stage",
        "db",
        "errors",
        "ringing",
        "results",
        "lanes",
    }


def test_the_walk_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph()
    assert "stage" in graph["results"]  # the walk reads the real package
    found = circles(graph)
    assert found == [], "import circles: " + "; ".join(" -> ".join(c) for c in found)
