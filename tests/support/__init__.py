"""What the tests share besides their fixtures (tests/conftest.py): stage lists that
FAIRQUEUE_STAGES names (``support.cron_stages:STAGES``), processes a test starts and kills
(``drain_worker``, ``sigkill_worker``, ``soak``), stand-ins for what AWS runs (``moto_sqs``,
``deployed``, ``lambda_runtime``), the schema's catalog, and small readers of rows (``rows``)."""
