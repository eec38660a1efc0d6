-- The runs still open, oldest first: the sweeper closes those whose process died before it
-- could close them (fairqueue.close_abandoned_runs, sql/functions/runs.sql).

create index runs_open_idx on fairqueue.runs (started_at) where finished_at is null;
