"""What only development, the tests and the benchmark use; production code does not run it.

- ``embedded``: a PostgreSQL from a wheel when no ``DATABASE_URL`` is given;
- ``example``: the example pipeline that ``make run`` drains;
- ``lambda_loop``: a cron handler called on this machine exactly as Lambda calls it;
- ``pooler``: a PgBouncer in transaction mode on this machine;
- ``upstream``: a stand-in upstream service whose held work is kept in the database.
"""
