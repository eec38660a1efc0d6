"""The operators' dashboard: the queue, the fairness and the runs in a browser, behind a login
with the operator secret (``fairqueue serve --role dashboard``)."""

from .app import Dashboard
from .server import DashboardServer, dashboard_address
from .sessions import dashboard_secret

__all__ = ["Dashboard", "DashboardServer", "dashboard_address", "dashboard_secret"]
