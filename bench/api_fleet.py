"""A fleet of one-connection API processes, standing in for Lambda's warm containers: each
answers one request at a time on one database connection, as a container does.

``python -m bench.api_fleet --dsn DSN --processes N --ports-file PATH`` is the launcher: it
imports fairqueue and loads the stages (``FAIRQUEUE_STAGES``) once, then forks N children
before opening any connection or thread, so they share the imported pages. Each child opens
``fairqueue.api.ApiServer`` on a free loopback port with a pool of one, answers one admission
of its own (a warm container has answered before: its connection is open, the backend's caches
and the resolver's routes are warm, which costs a fresh process some tens of milliseconds that
200 of them would otherwise spend inside the timed level), reports its port through a pipe and
answers until SIGTERM. The launcher writes the ports to PATH (JSON, in the children's order),
then waits for SIGTERM, which it forwards to the children before reaping them. A child that
fails or ends before then ends the fleet, with why on stderr.

The bench side is ``api_fleet``: the launcher in a session of its own (so the whole fleet can
be killed together), its ports, and a BenchError when any of it died.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fairqueue import api
from fairqueue.roles import function

from .errors import BenchError

ROOT = Path(__file__).resolve().parents[1]
# Forking and connecting cost a few milliseconds a process; a busy machine takes longer.
START_S = 60.0
START_S_PER_PROCESS = 0.5
# Closing a child's server waits for the requests in flight (none, once the clients stopped).
STOP_S = 30.0
POLL_S = 0.1
WARM_TIMEOUT_S = 60.0
_TERM = {signal.SIGTERM}


@dataclass(frozen=True)
class WarmUp:
    """The admission each process answers before it reports its port: a job of `job_type`
    for `tenant`, each process in a lane of its own."""

    job_type: str
    tenant: str


# The launcher and its children (in the launcher's process).


def _report(fd: int, line: str) -> None:
    # One line, shorter than the pipe's atomic write, so reports do not interleave.
    with suppress(OSError):
        os.write(fd, (line.replace("\n", " ")[:400] + "\n").encode())


def _admit_once(port: int, secret: str, warm: WarmUp, index: int) -> None:
    """POST /jobs to this process's own server, through HTTP as the clients will."""
    token = api.mint_token(secret, tenant_id=warm.tenant, lane=f"warm-{index}", ttl_s=600)
    body = json.dumps({"type": warm.job_type, "payload": {"warm": index}})
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WARM_TIMEOUT_S)
    try:
        conn.request("POST", "/jobs", body=body, headers=headers)
        response = conn.getresponse()
        answer = response.read()
    finally:
        conn.close()
    if response.status != 202:
        raise BenchError(f"its warm-up admission was answered {response.status} {answer[:200]!r}")


def _serve_one(index: int, dsn: str, secret: str, warm: WarmUp, report: int) -> int:
    """A child: an ApiServer with a pool of one, warmed by one admission, until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _TERM)
    failed: list[str] = []

    def warm_then_report(port: int) -> None:
        try:
            _admit_once(port, secret, warm, index)
        except Exception as exc:
            failed.append(repr(exc))
            _report(report, f"{index} failed {exc!r}")
            stop.set()
        else:
            _report(report, f"{index} {port}")

    try:
        with api.ApiServer(("127.0.0.1", 0), dsn, secret=secret, pool_size=1) as server:
            port = server.server_address[1]
            threading.Thread(target=warm_then_report, args=(port,), daemon=True).start()
            server.serve_until(stop)
    except BaseException as exc:
        _report(report, f"{index} failed {exc!r}")
        return 1
    return 1 if failed else 0


def _ended(children: dict[int, int]) -> str | None:
    """Why a child has ended, reaped, or None while they all run."""
    with suppress(ChildProcessError):
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            who = f"API process {children.pop(pid)} (pid {pid})"
            if os.WIFSIGNALED(status):
                return f"{who} was killed by signal {os.WTERMSIG(status)}"
            return f"{who} exited with {os.waitstatus_to_exitcode(status)}"
    return None


def _collect_ports(read_end: int, children: dict[int, int], timeout_s: float) -> list[int]:
    """Every child's port, in their order; raises BenchError on a failure, a child that ended
    or the timeout."""
    ports: dict[int, int] = {}
    buffer = b""
    deadline = time.monotonic() + timeout_s
    while len(ports) < len(children):
        if time.monotonic() > deadline:
            raise BenchError(f"{len(ports)} of {len(children)} API processes up in {timeout_s:g} s")
        ready, _, _ = select.select([read_end], [], [], POLL_S)
        if ready:
            chunk = os.read(read_end, 65536)
            if not chunk:
                raise BenchError(f"{len(ports)} of {len(children)} API processes reported a port")
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                index, _, rest = line.decode(errors="replace").partition(" ")
                if not rest.isdigit():
                    failure = rest.removeprefix("failed ")
                    raise BenchError(f"API process {index} did not start: {failure}")
                ports[int(index)] = int(rest)
        ended = _ended(children)
        if ended is not None:
            raise BenchError(ended)
    return [ports[k] for k in sorted(ports)]


def _stop_children(children: dict[int, int]) -> None:
    """SIGTERM to every child, then SIGKILL to those not gone within STOP_S; all reaped."""
    for pid in children:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    while children and time.monotonic() < deadline:
        if _ended(children) is None:
            time.sleep(POLL_S)
    for pid in children:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with suppress(ChildProcessError):
            os.waitpid(pid, 0)


def launch(dsn: str, processes: int, warm: WarmUp, ports_file: Path, timeout_s: float) -> int:
    """The launcher: fork the fleet, write its ports, serve until SIGTERM; 0, or 1 when a
    child failed or ended first."""
    function.load_stages()  # registers the stages' job types, as `serve` does
    secret = api.api_secret()
    # Objects made so far are never collected, so the collector does not write to (and copy)
    # the pages the children share with the launcher.
    gc.freeze()
    # SIGTERM waits until each process has its handler: a child sets its own.
    signal.pthread_sigmask(signal.SIG_BLOCK, _TERM)
    read_end, write_end = os.pipe()
    children: dict[int, int] = {}
    for index in range(processes):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(read_end)
                code = _serve_one(index, dsn, secret, warm, write_end)
            finally:
                os._exit(code)  # never back into the launcher's loop
        children[pid] = index
    os.close(write_end)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _TERM)
    try:
        ports = _collect_ports(read_end, children, timeout_s)
        written = ports_file.with_suffix(".tmp")
        written.write_text(json.dumps(ports))
        written.replace(ports_file)  # the bench never reads half a file
        while not stopping.wait(POLL_S):
            why = _ended(children)
            if why is not None:
                raise BenchError(why)
        # One that ended just before the SIGTERM ended before it, too.
        why = _ended(children)
        if why is not None:
            raise BenchError(why)
    except BenchError as exc:
        print(f"api_fleet: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        _stop_children(children)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.api_fleet", description=__doc__)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--processes", type=int, required=True)
    parser.add_argument("--warm-job-type", required=True)
    parser.add_argument("--warm-tenant", required=True)
    parser.add_argument("--ports-file", type=Path, required=True)
    parser.add_argument("--start-timeout", type=float, default=START_S)
    args = parser.parse_args(argv)
    warm = WarmUp(args.warm_job_type, args.warm_tenant)
    return launch(args.dsn, args.processes, warm, args.ports_file, args.start_timeout)


# The bench's side.


def _tail(log: IO[bytes]) -> str:
    """Why the launcher says the fleet failed, else the end of what its processes wrote."""
    log.seek(0)
    lines = log.read().decode(errors="replace").strip().splitlines()
    own = [line for line in lines if line.startswith("api_fleet:")]
    return " | ".join(own or lines[-3:]) or "no output"


def _wait_ports(process: subprocess.Popen[Any], ports_file: Path, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while not ports_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise BenchError("the API fleet did not start")
        time.sleep(POLL_S)
    ports: list[int] = json.loads(ports_file.read_text())
    return ports


def _stop_launcher(process: subprocess.Popen[Any]) -> int:
    """The launcher stopped, and whatever is left of its fleet; its exit code (0 when every
    process of the fleet was still up)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_S + 10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    # Whatever is left of the fleet (the launcher's session) when the launcher did not reap it.
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return process.returncode


@contextmanager
def api_fleet(
    dsn: str, processes: int, env: Mapping[str, str], warm: WarmUp
) -> Iterator[list[int]]:
    """`processes` one-connection API processes on `dsn`, with `env` (the secret, the stages,
    the pooler setting), each warmed by one admission, until the block ends; their ports.
    Raises BenchError, with the end of the launcher's log, when the fleet does not start or, at
    the block's end, when any of it has died."""
    timeout_s = START_S + START_S_PER_PROCESS * processes
    with (
        tempfile.TemporaryDirectory(prefix="fairqueue-bench-fleet-") as scratch,
        tempfile.TemporaryFile() as log,
    ):
        ports_file = Path(scratch) / "ports.json"
        command = [
            *(sys.executable, "-m", "bench.api_fleet", "--dsn", dsn),
            *("--processes", str(processes), "--ports-file", str(ports_file)),
            *("--warm-job-type", warm.job_type, "--warm-tenant", warm.tenant),
            *("--start-timeout", str(timeout_s)),
        ]
        process = subprocess.Popen(
            command, cwd=ROOT, env=dict(env), stdout=log, stderr=log, start_new_session=True
        )
        try:
            ports = _wait_ports(process, ports_file, timeout_s + 10)
        except BaseException as exc:
            _stop_launcher(process)
            if isinstance(exc, BenchError):
                raise BenchError(f"{exc}: {_tail(log)}") from None
            raise
        try:
            yield ports
        except BaseException:
            _stop_launcher(process)
            raise
        if _stop_launcher(process) != 0:
            raise BenchError(f"the API fleet did not last the level: {_tail(log)}")


if __name__ == "__main__":
    sys.exit(main())
