"""The admission bench's clients: threads in CLIENT_PROCESSES spawned processes, so the load
generator shares no GIL with the API server (nor, much, with itself).

Each client is a thread with its own token (its own lane) and one http.client connection,
posting one job after another; every answer other than 202 is an error, kept with an example.
Client k of a level posts to ports[k % len(ports)]: one API process, or its own in a fleet.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing as mp
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .errors import BenchError

CLIENT_PROCESSES = 2
REQUEST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Task:
    job_type: str
    tokens: list[str]
    # The port each token's client posts to.
    ports: list[int]
    start_at: float
    measure_from: float
    stop_at: float


@dataclass
class Tally:
    latencies_ms: list[float] = field(default_factory=list)
    admitted: int = 0
    errors: int = 0
    error_example: str | None = None
    last_finish: float = 0.0
    failure: str | None = None


def _client(task: Task, token: str, port: int, lane: int, into: Tally) -> None:
    """One client: POST /jobs one after another on its kept-open connection until stop_at;
    after a failure http.client opens it again."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    time.sleep(max(0.0, task.start_at - time.monotonic()))
    n = 0
    while (began := time.monotonic()) < task.stop_at:
        body = json.dumps({"type": task.job_type, "payload": {"lane": lane, "n": n}})
        n += 1
        problem = None
        try:
            conn.request("POST", "/jobs", body=body, headers=headers)
            response = conn.getresponse()
            raw = response.read()
            if response.status != 202:
                problem = f"{response.status} {raw[:200].decode(errors='replace')}"
        except (OSError, http.client.HTTPException) as exc:
            problem = repr(exc)
            conn.close()
        ended = time.monotonic()
        if began < task.measure_from:
            continue
        into.last_finish = max(into.last_finish, ended)
        if problem is None:
            into.admitted += 1
            into.latencies_ms.append((ended - began) * 1000)
        else:
            into.errors += 1
            into.error_example = into.error_example or problem
    conn.close()


def _run(task: Task, lane_base: int) -> Tally:
    tallies = [Tally() for _ in task.tokens]
    threads = [
        threading.Thread(
            target=_client, args=(task, token, task.ports[k], lane_base + k, tallies[k])
        )
        for k, token in enumerate(task.tokens)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = Tally()
    for t in tallies:
        total.latencies_ms += t.latencies_ms
        total.admitted += t.admitted
        total.errors += t.errors
        total.error_example = total.error_example or t.error_example
        total.last_finish = max(total.last_finish, t.last_finish)
    return total


def client_process(index: int, tasks: Any, results: Any) -> None:
    """Runs the tasks it is given until it is given None; a tally for each."""
    while (task := tasks.get()) is not None:
        try:
            results.put(_run(task, index * 100_000))
        except BaseException as exc:
            results.put(Tally(failure=repr(exc)))


class Clients:
    """CLIENT_PROCESSES spawned processes that run the clients of each level between them."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(CLIENT_PROCESSES)]
        self.procs = [
            ctx.Process(target=client_process, args=(k, q, self.results), name=f"bench-admit-{k}")
            for k, q in enumerate(self.tasks)
        ]
        for p in self.procs:
            p.start()

    def run(
        self, ports: list[int], job_type: str, tokens: list[str], warmup_s: float, seconds: float
    ) -> tuple[float, list[Tally]]:
        """Each process's tally, and when the timed part started; client k (of `tokens`)
        posts to ports[k % len(ports)]."""
        # time.monotonic is system-wide on Linux: every process starts at the same instant.
        start_at = time.monotonic() + 0.2
        measure_from = start_at + warmup_s
        sent = 0
        step = len(self.tasks)
        for k, q in enumerate(self.tasks):
            share = tokens[k::step]
            if share:
                to = [ports[i % len(ports)] for i in range(k, len(tokens), step)]
                q.put(Task(job_type, share, to, start_at, measure_from, measure_from + seconds))
                sent += 1
        found: list[Tally] = []
        deadline = start_at + warmup_s + seconds + REQUEST_TIMEOUT_S + 30
        while len(found) < sent:
            try:
                found.append(self.results.get(timeout=1.0))
            except queue.Empty:
                if time.monotonic() > deadline or not all(p.is_alive() for p in self.procs):
                    raise BenchError(
                        f"admission: {len(found)} of {sent} client processes reported"
                    ) from None
        failed = [t.failure for t in found if t.failure]
        if failed:
            raise BenchError(f"admission: a client process failed: {failed[0]}")
        return measure_from, found

    def close(self) -> None:
        for q in self.tasks:
            q.put(None)
        for p in self.procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
