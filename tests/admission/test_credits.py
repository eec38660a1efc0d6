"""Credits are one tenant's, whatever the login, and never overdrawn, whatever the concurrency.

Each test runs twice: as the application role, held to the tenant policies, and as a superuser
login, which the policies do not hold; the library's own predicates must keep the boundary then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fairqueue import Stage, connect
from fairqueue.cli import main
from fairqueue.db import Connection
from fairqueue.errors import InvalidPayload
from fairqueue.lanes import (
    MAX_BALANCE,
    Admission,
    InsufficientCredit,
    add_credits,
    admit,
    balance,
    refund,
)
from fairqueue.tenancy import tenant_scope
from support.rows import race

PAID = Stage("paid_report", handler=lambda job: None, credit_cost=5)
LOGINS = ["application role", "superuser"]


@pytest.fixture(params=LOGINS)
def login(request: pytest.FixtureRequest, dsn: str, admin_dsn: str) -> str:
    return dsn if request.param == "application role" else admin_dsn


def ledger(conn: Any, tenant: str) -> list[tuple[str, int]]:
    rows = conn.execute(
        "select kind, amount from fairqueue.credits where tenant_id = %s order by id", (tenant,)
    ).fetchall()
    return [(row["kind"], row["amount"]) for row in rows]


def test_a_balance_is_one_tenants_whatever_the_login(login: str) -> None:
    with connect(login, autocommit=True) as c:
        add_credits(c, "acme", 3)
        add_credits(c, "globex", 100)
        assert (balance(c, "acme"), balance(c, "globex"), balance(c, "nobody")) == (3, 100, 0)


def test_a_tenant_without_credits_cannot_pay_with_anothers(login: str, conn: Any) -> None:
    add_credits(conn, "globex", 100)
    with connect(login, autocommit=True) as c, pytest.raises(InsufficientCredit, match="is 0"):
        admit(c, "ada", "paid_report", {}, tenant_id="acme")
    assert conn.execute("select count(*) as n from fairqueue.jobs").fetchone()["n"] == 0
    assert ledger(conn, "acme") == []


def test_admissions_in_many_lanes_at_once_spend_only_what_the_balance_holds(
    login: str, conn: Any
) -> None:
    add_credits(conn, "acme", 12)  # pays for two at 5 each, not three

    def click(lane: str) -> Callable[[], Admission]:
        def go() -> Admission:
            with connect(login) as c:
                return admit(c, lane, "paid_report", {}, tenant_id="acme")

        return go

    outcomes = race([click(f"user-{n}") for n in range(8)])

    admitted = [o for o in outcomes if isinstance(o, Admission)]
    refused = [o for o in outcomes if isinstance(o, InsufficientCredit)]
    assert (len(admitted), len(refused)) == (2, 6), outcomes
    assert balance(conn, "acme") == 2
    assert ledger(conn, "acme") == [("grant", 12), ("debit", -5), ("debit", -5)]
    jobs = conn.execute("select id from fairqueue.jobs order by id").fetchall()
    assert sorted(row["id"] for row in jobs) == sorted(a.job_id for a in admitted)


def test_a_refund_pays_back_a_failed_jobs_debit_once_and_only_its_own_tenant(
    login: str, conn: Any
) -> None:
    add_credits(conn, "acme", 5)
    with connect(login, autocommit=True) as c:
        admitted = admit(c, "ada", "paid_report", {}, tenant_id="acme")
        with tenant_scope(c, "acme"):
            # Still pending: nothing to pay back yet.
            assert refund(c, "acme", admitted.job_id, "too soon") == 0
        conn.execute(
            "update fairqueue.jobs set status = 'failed', finished_at = now() where id = %s",
            (admitted.job_id,),
        )
        with tenant_scope(c, "globex"):
            assert refund(c, "globex", admitted.job_id, "not globex's") == 0
        with tenant_scope(c, "acme"):
            assert refund(c, "acme", admitted.job_id, "given up") == 5
            assert refund(c, "acme", admitted.job_id, "again") == 0
    assert ledger(conn, "acme") == [("grant", 5), ("debit", -5), ("refund", 5)]
    assert ledger(conn, "globex") == []


@pytest.mark.parametrize(
    ("tenant", "amount", "kind", "message"),
    [
        ("acme", -5, "grant", "above 0"),
        ("acme", 0, "grant", "above 0"),
        ("acme", 5, "debit", "below 0"),
        ("acme", 2.5, "grant", "whole number"),
        ("", 5, "grant", "tenant_id"),
    ],
)
def test_add_credits_refuses_a_bad_amount_or_tenant_and_writes_nothing(
    conn: Connection, tenant: str, amount: Any, kind: Any, message: str
) -> None:
    with pytest.raises(InvalidPayload, match=message):
        add_credits(conn, tenant, amount, kind=kind)
    assert conn.execute("select count(*) as n from fairqueue.credits").fetchone() == {"n": 0}


def test_cli_grants_credits_and_shows_the_balance(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--database-url", dsn, "credits", "grant", "acme", "10", "--note", "trial"]) == 0
    assert capsys.readouterr().out.strip() == "granted 10 credit(s) to 'acme'; balance 10"
    assert main(["--database-url", dsn, "credits", "balance", "acme"]) == 0
    assert capsys.readouterr().out.strip() == "10"
    assert balance(conn, "acme") == 10
    with pytest.raises(SystemExit) as exited:
        main(["--database-url", dsn, "credits", "grant", "acme", "-3"])
    assert exited.value.code == 2
    assert main(["--database-url", dsn, "credits", "grant", "", "3"]) == 2
    assert balance(conn, "acme") == 10


def test_a_grant_past_the_most_a_balance_holds_is_refused_with_nothing_written(
    login: str, conn: Connection
) -> None:
    with connect(login, autocommit=True) as c:
        add_credits(c, "acme", MAX_BALANCE - 5)
        with pytest.raises(InvalidPayload, match="past the most a balance holds"):
            add_credits(c, "acme", 6)
        with pytest.raises(InvalidPayload, match="moves at most"):
            add_credits(c, "acme", 2**63 - 1)
        add_credits(c, "acme", 5)  # exactly the most is allowed
        assert balance(c, "acme") == MAX_BALANCE
    assert ledger(conn, "acme") == [("grant", MAX_BALANCE - 5), ("grant", 5)]


def test_concurrent_grants_never_take_a_balance_past_the_most(dsn: str, conn: Connection) -> None:
    add_credits(conn, "acme", MAX_BALANCE - 10)

    def grant() -> str:
        with connect(dsn, autocommit=True) as c:
            try:
                add_credits(c, "acme", 6)
            except InvalidPayload:
                return "refused"
            return "granted"

    assert sorted(race([grant, grant, grant])) == ["granted", "refused", "refused"]
    assert balance(conn, "acme") == MAX_BALANCE - 4


def test_a_ledger_summing_past_a_bigint_still_reads(admin_dsn: str, conn: Connection) -> None:
    # Written as the owner, as grants could before balances were bounded.
    with connect(admin_dsn, autocommit=True) as owner:
        for _ in range(2):
            owner.execute(
                "insert into fairqueue.credits (tenant_id, kind, amount) values ('acme', 'grant',"
                " 5000000000000000000)"
            )
    assert balance(conn, "acme") == 2**63 - 1
    with pytest.raises(InvalidPayload, match="past the most a balance holds"):
        add_credits(conn, "acme", 1)


def test_cli_refuses_a_grant_no_balance_can_hold_in_one_line(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused where the command line is read: no amount past the most a balance holds.
    for amount in ("1000000000000001", "9223372036854775807", "99999999999999999999"):
        with pytest.raises(SystemExit) as exited:
            main(["--database-url", dsn, "credits", "grant", "acme", amount])
        assert exited.value.code == 2
        assert capsys.readouterr().err.count("\n") == 1
    assert main(["--database-url", dsn, "credits", "balance", "acme"]) == 0
    assert capsys.readouterr().out.strip() == "0"
    assert ledger(conn, "acme") == []
