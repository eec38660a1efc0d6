"""The package's modules import each other without a circle, and development code stays apart.

For circles every import counts: at module level, inside ``if TYPE_CHECKING:`` and inside
functions. A circle hidden in a function is still a circle; it only moves the failure to the
first call. For development code the rule is about what importing a module runs: nothing
outside ``dev/`` and ``cli/`` imports ``fairqueue.dev`` when it is imported, since the Lambda
layer leaves ``dev/`` (and ``cli/``) out.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import fairqueue

PACKAGE = Path(fairqueue.__file__).parent


def module_name(path: Path) -> str:
    """A file's module under the package, dotted: ``pipeline.claim``; a folder's ``__init__.py``
    is the folder (``pipeline``), the package's own is ``""``."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = frozenset(module_name(path) for path in PACKAGE.rglob("*.py"))


def _package_of(module: str, is_package: bool) -> list[str]:
    parts = module.split(".") if module else []
    return parts if is_package else parts[:-1]


def run_at_import(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes that run when the module is imported: all but the bodies of its functions
    (a class's body runs, its methods' do not)."""
    for node in ast.iter_child_nodes(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield node
            yield from run_at_import(node)


def imported_modules(
    source: str, module: str = "", *, is_package: bool = True, at_import: bool = False
) -> set[str]:
    """The package's modules that a module's source imports, anywhere in it (with
    ``at_import``, only where importing the module runs the import). ``module`` and
    ``is_package`` place the source in the package, for its relative imports."""
    found: set[str] = set()

    def add(parts: list[str], names: list[str]) -> None:
        # ``from a import b``: b is module a.b when there is one (then a's own names are not
        # read), else a name a defines.
        base = ".".join(parts)
        submodules = {f"{base}.{name}" if base else name for name in names}
        found.update(submodules)
        if not names or not submodules <= MODULES:
            found.add(base)

    tree = ast.parse(source)
    for node in run_at_import(tree) if at_import else ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "fairqueue":
                    add(parts[1:], [])
        elif isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
            parts = node.module.split(".") if node.module else []
            if node.level > 0:
                package = _package_of(module, is_package)
                base = package[: len(package) - (node.level - 1)]
                add(base + parts, names)
            elif parts and parts[0] == "fairqueue":
                add(parts[1:], names)
    return found & MODULES


def import_graph(*, at_import: bool = False) -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        source = path.read_text(encoding="utf-8")
        imported = imported_modules(
            source, name, is_package=path.name == "__init__.py", at_import=at_import
        )
        graph[name] = imported - {name}
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
        "from . import claim, executor\n"
        "from ..stage import Stage\n"
        "import fairqueue.db\n"
        "from fairqueue.errors import ConfigurationError\n"
        "from fairqueue.doorbells import ringing\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from ..results import Result\n"
        "def late():\n"
        "    from ..lanes import admit\n"
    )
    assert imported_modules(source, "pipeline.run", is_package=False) == {
        "pipeline.claim",
        "pipeline.executor",
        "stage",
        "db",
        "errors",
        "doorbells.ringing",
        "results",
        "lanes",
    }


def test_the_walk_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph()
    assert "stage" in graph["results"]  # the walk reads the real package
    assert "pipeline.claim" in graph["pipeline.run"]  # and its folders
    found = circles(graph)
    assert found == [], "import circles: " + "; ".join(" -> ".join(c) for c in found)


def test_the_families_live_in_folders() -> None:
    top = sorted(path.stem for path in PACKAGE.glob("*.py"))
    assert len(top) <= 30, top
    assert [name for name in top if name.startswith(("api_", "cli_", "doorbell"))] == []
    folders = {module.split(".")[0] for module in MODULES if "." in module}
    assert folders == {
        "api",
        "cli",
        "dashboard",
        "dev",
        "doorbells",
        "pipeline",
        "roles",
        "schedules",
    }
    for folder in folders:  # each folder says what it holds
        assert ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text()))


def test_the_walk_at_import_leaves_out_function_bodies() -> None:
    source = (
        "from ..dev import upstream\n"
        "if True:\n"
        "    from ..dev import example\n"
        "class Late:\n"
        "    from ..lanes import admit\n"
        "    def method(self):\n"
        "        from ..dev import pooler\n"
        "def late():\n"
        "    from ..dev import embedded\n"
        "later = lambda: __import__('x')\n"
    )
    assert imported_modules(source, "roles.startup", is_package=False, at_import=True) == {
        "dev.upstream",
        "dev.example",
        "lanes",
    }


def development_code(module: str) -> bool:
    return module == "dev" or module.startswith("dev.")


def test_nothing_outside_dev_and_cli_imports_dev_at_import() -> None:
    """The rule that lets the Lambda layer leave dev/ out: a module that needs development code
    imports it in the function that uses it, after checking it may."""
    graph = import_graph(at_import=True)
    assert "dev.upstream" in graph["dev.example"]  # the walk reads the real package
    assert "dev.lambda_loop" in graph["cli"]
    offenders = {
        module: sorted(filter(development_code, imported))
        for module, imported in graph.items()
        if not development_code(module)
        and module != "cli"
        and not module.startswith("cli.")
        and any(map(development_code, imported))
    }
    assert offenders == {}
