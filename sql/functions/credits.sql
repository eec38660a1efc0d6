-- The credit ledger, written only here: the application role reads its tenant's entries but
-- inserts none itself (sql/policies/credits.sql). A grant adds credits to the tenant the caller's
-- transaction is clamped to; a debit or a refund is tied to a real job of that tenant, a debit
-- to a job the tenant has, a refund to a cancelled or failed job and the debit it pays back.
-- Admission writes a job's debit with the job (sql/functions/admission.sql). An entry moves at
-- most 10^15 credits and a grant leaves the balance at most 10^15 (fairqueue.lanes.MAX_BALANCE),
-- checked here too so that a direct call cannot mint past them; two grants racing are kept
-- apart by the balance's lock, which the library's caller takes (fairqueue.lanes.add_credits).

-- A grant (no job, an amount above 0) or a debit (a job of the tenant, an amount below 0):
-- the entry's id; no row when the job was already charged.
create or replace function fairqueue.credit_entry(p_tenant_id text, p_job_id uuid,
    p_kind text, p_amount bigint, p_note text)
returns table (id bigint)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(p_tenant_id is not null
            and p_tenant_id = fairqueue.current_tenant(),
        'credit_entry: credits are written only for the tenant the transaction is clamped to');
    perform fairqueue.door_argument(
        (p_kind = 'grant' and p_job_id is null and p_amount > 0)
            or (p_kind = 'debit' and p_job_id is not null and p_amount < 0),
        format('credit_entry: a grant has no job and an amount above 0, a debit a job and an'
               ' amount below 0; got a %s of %s', p_kind, p_amount));
    perform fairqueue.door_argument(abs(p_amount::numeric) <= 1000000000000000
            and (p_kind <> 'grant'
                 or fairqueue.credit_balance(p_tenant_id)::numeric + p_amount
                    <= 1000000000000000),
        format('credit_entry: an entry moves at most 10^15 credits and a grant leaves a balance'
               ' of at most 10^15; got a %s of %s', p_kind, p_amount));
    perform fairqueue.door_argument(p_job_id is null or exists (
            select 1 from fairqueue.all_jobs j
             where j.id = p_job_id and j.tenant_id = p_tenant_id),
        format('credit_entry: the tenant has no job %s', p_job_id));
    return query
    insert into fairqueue.credits as c (tenant_id, job_id, kind, amount, note)
    values (p_tenant_id, p_job_id, p_kind, p_amount, p_note)
    on conflict (job_id, kind) where kind <> 'grant' do nothing
    returning c.id;
end $$;
alter function fairqueue.credit_entry(text, uuid, text, bigint, text) owner to fairqueue_owner;
revoke all on function fairqueue.credit_entry(text, uuid, text, bigint, text)
    from public, fairqueue_app;
grant execute on function fairqueue.credit_entry(text, uuid, text, bigint, text) to fairqueue_app;

-- A cancelled or failed job's debit paid back, once: the amount; no row when the job was never
-- charged, is not the tenant's, is neither cancelled nor failed, or was refunded already.
create or replace function fairqueue.credit_refund(p_tenant_id text, p_job_id uuid,
    p_note text)
returns table (amount bigint)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    return query
    insert into fairqueue.credits as c (tenant_id, job_id, kind, amount, note)
    select d.tenant_id, d.job_id, 'refund', -d.amount, p_note
      from fairqueue.credits d
     where d.job_id = p_job_id and d.kind = 'debit' and d.tenant_id = p_tenant_id
       and p_tenant_id = fairqueue.current_tenant()
       and exists (select 1 from fairqueue.all_jobs j
                    where j.id = p_job_id and j.tenant_id = p_tenant_id
                      and j.status in ('cancelled', 'failed'))
    on conflict (job_id, kind) where kind <> 'grant' do nothing
    returning c.amount;
end $$;
alter function fairqueue.credit_refund(text, uuid, text) owner to fairqueue_owner;
revoke all on function fairqueue.credit_refund(text, uuid, text) from public, fairqueue_app;
grant execute on function fairqueue.credit_refund(text, uuid, text) to fairqueue_app;
