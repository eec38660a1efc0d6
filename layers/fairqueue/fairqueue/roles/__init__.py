"""The roles a deployment runs, each the same code on Lambda and under ``fairqueue serve``.

- ``cron``: the scheduled drain, one pipeline run per invocation;
- ``worker``: the doorbell worker, one job claimed by id;
- ``sweeper``: rings again what a lost doorbell left, fails abandoned jobs;
- ``backstop``: saves the results no client saved (and vacuums the hot tables, ``vacuuming``);
- ``function``: what every Lambda function shares at its cold start;
- ``serve``: every role in one long-running process, with ``startup`` and ``stopping``.
"""
