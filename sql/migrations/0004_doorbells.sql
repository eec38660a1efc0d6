-- Doorbells: the job row is the outbox. rung_at is when the sweeper last rang a job's doorbell;
-- a doorbell stage's job still pending and due a while after its last ring (or its creation)
-- is rung again, so a doorbell lost anywhere costs a delay, never the job.

alter table fairqueue.jobs add column rung_at timestamptz;
