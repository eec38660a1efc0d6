"""The operators' dashboard: the queue, the fairness and the runs in a browser, behind a login
with the operator secret (``fairqueue serve --role dashboard``).

- ``app``: the WSGI application: login, form tokens, routing, answers and their headers;
- ``pages``: each page and action, read through the CLI's functions and the dashboard's doors;
- ``reads``: those doors (sql/functions/dashboard.sql) as dataclasses;
- ``charts``: the charts' Chart.js configurations;
- ``sessions``: the operator secret, signed session cookies, form tokens;
- ``request``: a request as the pages read it;
- ``server``: the local server of ``--role dashboard`` (cheroot);
- ``lambda_http``: the application behind API Gateway;
- ``templates/``, ``static/``: the pages, the stylesheet, the script, Chart.js and its licence.
"""

from .app import Dashboard
from .server import DashboardServer, dashboard_address
from .sessions import dashboard_secret

__all__ = ["Dashboard", "DashboardServer", "dashboard_address", "dashboard_secret"]
