"""The peers: the Postgres job queues a Python team would pick instead of fairqueue.

Each runs in its own database on the same server, installed by its own installer, and is
drained by its own workers in processes of their own.
"""

from .peer import Peer
from .pgqueuer_drain import PEER as PGQUEUER
from .procrastinate_drain import PEER as PROCRASTINATE

PEERS: tuple[Peer, ...] = (PGQUEUER, PROCRASTINATE)

__all__ = ["PEERS", "PGQUEUER", "PROCRASTINATE", "Peer"]
