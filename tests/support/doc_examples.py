"""The fenced code blocks of the documents (README.md, docs/ and the others `documents()`
names), and what each one is.

Every fence says what it holds by its language tag:

- ``python``: run, the document's Python blocks in order in one namespace;
- ``sh``, ``bash``, ``shell``: run as one shell script, each block in a fresh shell;
- ``console``: a session; its ``$ `` lines are the commands run, the rest is what they print;
- ``sql``: run as the schema's owner in a transaction that is rolled back;
- ``text``, ``json``: output, listings and data samples, never run.

An HTML comment that ends on the line just before a fence says more about the block:

- ``<!-- not run: why -->``: the block is not run here (an AWS account, a placeholder of yours);
- ``<!-- given: ... -->``: what the example presumes, run before it in the same namespace,
  shell or transaction (a handler the snippet names, a table of yours).

A fence with no tag, another tag, or a comment that is neither of these is a problem the tests
report, so a new example is either run or says why not.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RUN_TAGS = frozenset({"python", "sh", "bash", "shell", "console", "sql"})
SHELL_TAGS = frozenset({"sh", "bash", "shell"})
OUTPUT_TAGS = frozenset({"text", "json"})

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
COMMENT_END = re.compile(r"-->\s*$")
MARKER = re.compile(r"^<!--\s*(?P<kind>[a-z ]+):(?P<body>.*?)-->\s*$", re.DOTALL)


@dataclass(frozen=True)
class Block:
    """One fenced block of a document: where it opens, its tag, its text (dedented to the
    fence) and what the comment before it says."""

    doc: str  # relative to the repository, e.g. "docs/api.md"
    line: int  # the opening fence's line, 1-based
    tag: str
    text: str
    not_run: str | None = None
    given: str | None = None
    marker: str | None = None  # the comment before the fence, when it is not one of ours
    closed: bool = True

    @property
    def id(self) -> str:
        return f"{self.doc}:L{self.line}"

    @property
    def first_text_line(self) -> int:
        return self.line + 1

    @property
    def runs(self) -> bool:
        return self.tag in RUN_TAGS and self.not_run is None


def documents() -> list[Path]:
    """README.md, CHANGELOG.md, bench/README.md and every Markdown file under docs/, however
    deep."""
    return [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        ROOT / "bench" / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
    ]


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    doc = path.relative_to(ROOT).as_posix()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        tag = opening["info"].strip().split(" ")[0].lower() if opening["info"].strip() else ""
        body: list[str] = []
        closed = False
        end = index + 1
        while end < len(lines):
            closing = FENCE.match(lines[end])
            if (
                closing is not None
                and closing["fence"][0] == fence[0]
                and len(closing["fence"]) >= len(fence)
                and not closing["info"].strip()
            ):
                closed = True
                break
            body.append(_dedent(lines[end], indent))
            end += 1
        comment = _comment_before(lines, index)
        not_run = given = marker = None
        if comment is not None:
            parsed = MARKER.match(comment)
            kind = parsed["kind"].strip() if parsed else None
            if parsed and kind == "not run":
                not_run = parsed["body"].strip()
            elif parsed and kind == "given":
                given = textwrap.dedent(parsed["body"].strip("\n")).rstrip()
            else:
                marker = comment
        found.append(
            Block(
                doc=doc,
                line=index + 1,
                tag=tag,
                text="\n".join(body) + "\n",
                not_run=not_run,
                given=given,
                marker=marker,
                closed=closed,
            )
        )
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in documents() for block in blocks_of(path)]


def problems(block: Block) -> list[str]:
    """What is wrong with how a block says what it is; empty when it is run or recognised."""
    where = f"{block.id}: "
    found: list[str] = []
    if not block.closed:
        found.append(where + "the fence is never closed")
    if block.marker is not None:
        found.append(
            where + f"the comment before the fence is neither `not run: why` nor `given: ...`:"
            f" {block.marker!r}"
        )
    if not block.tag:
        found.append(
            where + "the fence has no language: ```text for output or a listing, ```json for"
            " data, else the language it runs in (python, sh, console, sql), or a"
            " `<!-- not run: why -->` comment on the line before"
        )
    elif block.tag not in RUN_TAGS | OUTPUT_TAGS:
        found.append(where + f"```{block.tag} is neither run nor output here")
    if block.not_run is not None and not block.not_run:
        found.append(where + "`not run:` says no reason")
    if block.not_run is not None and block.tag not in RUN_TAGS:
        found.append(where + "`not run:` on a block that is output anyway")
    if block.given is not None and (block.not_run is not None or block.tag not in RUN_TAGS):
        found.append(where + "`given:` on a block that is not run")
    if block.tag == "text" and any(line.startswith("$ ") for line in block.text.splitlines()):
        found.append(where + "a ```text block with `$ ` commands is a session: tag it ```console")
    if block.tag == "console" and not commands_of_session(block.text):
        found.append(where + "a ```console block with no `$ ` command")
    if block.tag == "json" and "…" not in block.text:
        try:
            json.loads(block.text)
        except ValueError as exc:
            found.append(where + f"```json that is not JSON (and elides nothing with …): {exc}")
    return found


def commands_of_session(text: str) -> list[str]:
    """The commands of a console session: its `$ ` lines, with any continuation lines."""
    commands: list[str] = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("$ "):
            command = line[2:]
            follow = number + 1
            while command.endswith("\\") and follow < len(lines):
                command += "\n" + lines[follow]
                follow += 1
            commands.append(command)
    return commands


def last_command(script: str) -> tuple[int, str] | None:
    """The index and text of a script's last line that is a command (not blank, not a
    comment), when it is not a continuation of the line before."""
    lines = script.splitlines()
    for number in range(len(lines) - 1, -1, -1):
        line = lines[number].strip()
        if line and not line.startswith("#"):
            if number > 0 and lines[number - 1].rstrip().endswith("\\"):
                return None
            return number, lines[number]
    return None


def _dedent(line: str, indent: int) -> str:
    spaces = len(line) - len(line.lstrip(" "))
    return line[min(indent, spaces) :]


def _comment_before(lines: list[str], fence: int) -> str | None:
    """The HTML comment that ends on the line just before a fence, if one does."""
    end = fence - 1
    if end < 0 or not COMMENT_END.search(lines[end]):
        return None
    start = end
    while start >= 0 and "<!--" not in lines[start]:
        start -= 1
    if start < 0:
        return None
    return textwrap.dedent("\n".join(lines[start : end + 1])).strip()
