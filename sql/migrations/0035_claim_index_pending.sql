-- The claim index holds pending jobs only. It held running ones too, so that expired leases
-- could be found through it; the lease index finds those (every lease search names lease_until),
-- and with running rows in it every claim wrote an entry for each job it took.
drop index fairqueue.jobs_claim_idx;
create index jobs_claim_idx on fairqueue.jobs (type, run_after) where status = 'pending';
