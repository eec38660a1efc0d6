"""The examples of the documents (README.md, docs/**.md, bench/README.md) run as written, each
against a fresh database.

Every fenced block of the documents is run, recognised as output, or carries a
``<!-- not run: why -->`` comment (see ``doc_examples`` for the rules), so an example that stops
working, or a new one that nothing runs, fails here under its place, e.g. ``README.md:L52``.

What a reader brings is the environment: ``DATABASE_URL`` (the test's database: as its owner
for Python, as a fresh clone's embedded one is; as the application role for the shell),
``fairqueue`` on the ``PATH`` (a console script, as pip installs it), an upstream service at
``FAIRQUEUE_UPSTREAM_URL`` for Python, and ``myapp.stages:STAGES``, the stage list the documents
call yours, which here is the bundled example's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fairqueue.dev import pooler as local_pooler
from support import doc_examples
from support.doc_examples import SHELL_TAGS, Block
from support.upstream_service import FakeService

BLOCKS = doc_examples.all_blocks()
RUN = [block for block in BLOCKS if block.tag in doc_examples.RUN_TAGS]

# What a served role prints once it is doing its work, by role.
SERVING = {
    "all": "cron run ",
    "cron": "cron run ",
    "sweeper": "sweep ",
    "backstop": "backstop: ",
    "api": "the API listens on ",
}


def as_param(block: Block) -> Any:
    reason = f"{block.id} is not run: {block.not_run}"
    marks = [] if block.not_run is None else [pytest.mark.skip(reason=reason)]
    return pytest.param(block, id=block.id, marks=marks)


@pytest.mark.timeout(30)
def test_every_fence_is_run_recognised_or_says_why_not() -> None:
    found = [problem for block in BLOCKS for problem in doc_examples.problems(block)]
    assert not found, "\n".join(found)


@pytest.mark.timeout(30)
def test_the_examples_are_found() -> None:
    """A parser that stopped seeing fences would pass everything above: the documents hold
    Python, shell and SQL examples that run, in README.md and under docs/."""
    running = [block for block in BLOCKS if block.runs]
    assert {block.tag for block in running} >= {"python", "sh", "console", "sql"}
    assert {block.doc for block in running} >= {
        "README.md",
        "docs/api.md",
        "docs/tenancy.md",
        "docs/guide/writing-stages.md",
        "docs/guide/operating.md",
        "docs/guide/tenancy.md",
    }
    assert len(running) >= 12, [block.id for block in running]


@pytest.mark.timeout(240)
def test_the_readme_quickstart_runs_in_a_fresh_folder_with_no_database_named(
    tmp_path: Path,
) -> None:
    """The README's first Python block, saved as quickstart.py and run with nothing set, as a
    fresh clone after `make install` runs it: it starts the embedded Postgres in ./.pgdata,
    defines everything it uses, and prints what the ```text block after it shows. Run again, it
    prints the same jobs, `inbox` first: `reports` has now been served more in the last day."""
    blocks = doc_examples.blocks_of(doc_examples.ROOT / "README.md")
    quickstart = next(block for block in blocks if block.tag == "python")
    shown = blocks[blocks.index(quickstart) + 1]
    assert quickstart.runs and quickstart.given is None, quickstart.id
    assert shown.tag == "text", f"{quickstart.id} is not followed by the output it prints"
    (tmp_path / "quickstart.py").write_text(quickstart.text)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FAIRQUEUE_", "DATABASE_", "POWERTOOLS_"))
    }
    printed = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "quickstart.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=200,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        printed.append(done.stdout.splitlines())
    first = shown.text.splitlines()
    assert printed[0] == first
    assert printed[1] == [first[1], first[0], *first[2:]]
    assert first[1].startswith("acme inbox ")
    assert (tmp_path / ".pgdata" / "PG_VERSION").is_file()


@pytest.fixture
def reader_env(dsn: str, tmp_path: Path) -> dict[str, str]:
    """A reader's shell: the test's database, `fairqueue` on the PATH, `myapp.stages`, and none
    of the FAIRQUEUE_* settings of the shell that runs the tests."""
    bin_dir, app_dir = tmp_path / "bin", tmp_path / "app"
    bin_dir.mkdir()
    (app_dir / "myapp").mkdir(parents=True)
    shim = bin_dir / "fairqueue"
    # As pip writes a console script: its own folder, not the current one, first on sys.path.
    shim.write_text(
        f"#!{sys.executable}\nimport sys\nfrom fairqueue.cli import main\nsys.exit(main())\n"
    )
    shim.chmod(0o755)
    (app_dir / "myapp" / "__init__.py").write_text("")
    (app_dir / "myapp" / "stages.py").write_text("from fairqueue.dev.example import STAGES\n")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FAIRQUEUE_", "DATABASE_", "POWERTOOLS_"))
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(app_dir), env.get("PYTHONPATH")]))
    env["DATABASE_URL"] = dsn
    # The documents' servers listen on their default port; a free one keeps runs side by side apart.
    env["FAIRQUEUE_API_PORT"] = str(local_pooler.free_port())
    return env


@pytest.mark.timeout(90)
@pytest.mark.parametrize("block", [as_param(block) for block in RUN])
def test_example_runs(
    block: Block,
    dsn: str,
    admin_dsn: str,
    reader_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if block.tag == "python":
        run_python(block, admin_dsn, monkeypatch)
    elif block.tag == "sql":
        run_sql(block, admin_dsn)
    elif block.tag == "console":
        run_shell(
            block, "\n".join(doc_examples.commands_of_session(block.text)), reader_env, tmp_path
        )
    else:
        assert block.tag in SHELL_TAGS
        run_shell(block, block.text, reader_env, tmp_path)


# Python: the document's blocks in order, in one namespace.


def run_python(block: Block, owner_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("FAIRQUEUE_", "DATABASE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DATABASE_URL", owner_dsn)
    upstream = FakeService()
    monkeypatch.setenv("FAIRQUEUE_UPSTREAM_URL", upstream.url)
    earlier = [
        b
        for b in RUN
        if b.doc == block.doc and b.tag == "python" and b.runs and b.line < block.line
    ]
    namespace: dict[str, Any] = {"__name__": "__main__"}
    opened: list[psycopg.Connection[Any]] = []
    try:
        for each in [*earlier, block]:
            if each.given is not None:
                exec(compile(each.given, f"{each.id} (given)", "exec"), namespace)
                opened += connections_in(namespace)
            # Padded so that a traceback names the document's own line.
            source = "\n" * (each.first_text_line - 1) + each.text
            exec(compile(source, each.doc, "exec"), namespace)
            opened += connections_in(namespace)
    finally:
        for conn in opened:
            conn.close()
        upstream.stop()


def connections_in(namespace: dict[str, Any]) -> list[psycopg.Connection[Any]]:
    """The connections a block left bound, to close once the document's blocks have run (a
    later block may bind the same name to another)."""
    return [value for value in namespace.values() if isinstance(value, psycopg.Connection)]


# SQL: as the schema's owner, in a transaction rolled back.


def run_sql(block: Block, admin_dsn: str) -> None:
    with psycopg.connect(admin_dsn) as conn:
        if block.given is not None:
            conn.execute(block.given.encode())
        conn.execute(block.text.encode())
        conn.rollback()


# Shell: one script in a fresh bash; a block that ends serving is stopped once it serves.


def run_shell(block: Block, commands: str, env: dict[str, str], cwd: Path) -> None:
    script = commands if block.given is None else f"{block.given}\n{commands}"
    last = doc_examples.last_command(script)
    if last is not None and re.match(r"\s*fairqueue serve\b", last[1]):
        lines = script.splitlines()
        lines[last[0]] = "exec " + lines[last[0]].lstrip()
        serve_until_serving(block, "\n".join(lines), last[1], env, cwd)
        return
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.id} exited {done.returncode}\n--- stdout\n{done.stdout[-3000:]}"
        f"\n--- stderr\n{done.stderr[-3000:]}"
    )


def serve_until_serving(
    block: Block, script: str, command: str, env: dict[str, str], cwd: Path
) -> None:
    """Start the block; once its role does its work (the API answers /openapi.json), SIGTERM,
    which must end it at once with status 0 and no error logged."""
    role = re.search(r"--role\s+(\w+)", command)
    # A role it does not know ends it before it serves; the wait then says what it printed.
    serving = SERVING.get(role[1] if role else "all", "fairqueue serve: role")
    with subprocess.Popen(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        lines = Lines(process)
        try:
            seen = lines.wait_for(serving, timeout_s=30)
            assert seen is not None, f"{block.id} never printed {serving!r}:\n{lines.text()}"
            url = re.search(r"the API listens on (\S+)", lines.text())
            if url is not None:
                with urllib.request.urlopen(url[1] + "/openapi.json", timeout=10) as answer:
                    assert answer.status == 200
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=40)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
            lines.join()
    assert code == 0, f"{block.id} exited {code} on SIGTERM:\n{lines.text()}"
    errors = [line for line in lines.lines if '"level":"ERROR"' in line.replace(" ", "")]
    assert not errors, "\n".join(errors)


class Lines:
    """A process's stderr (and stdout), line by line, read on threads as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.readers = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in (process.stdout, process.stderr)
            if stream is not None
        ]
        for reader in self.readers:
            reader.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()

    def wait_for(self, text: str, timeout_s: float) -> str | None:
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or not any(reader.is_alive() for reader in self.readers):
                    return None
                self.changed.wait(min(left, 0.5))

    def text(self) -> str:
        with self.changed:
            return "\n".join(self.lines[-60:])

    def join(self) -> None:
        for reader in self.readers:
            reader.join(timeout=10)
