"""``fairqueue credits``: a tenant's balance, and a grant to it."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..lanes import MAX_BALANCE, add_credits, balance
from .common import app_connection, whole_number_argument


def add_commands(
    command: Callable[[str, str], argparse.ArgumentParser], database: argparse.ArgumentParser
) -> None:
    credits = command("credits", "a tenant's credit balance, or a grant to it")
    verbs = credits.add_subparsers(dest="credits_command", required=True)
    what = "the tenant's balance"
    p = verbs.add_parser("balance", parents=[database], help=what, description=what)
    p.add_argument("tenant", help="the tenant's id")
    p.set_defaults(func=cmd_balance)
    what = "add credits to the tenant's balance (a grant in its ledger)"
    p = verbs.add_parser("grant", parents=[database], help=what, description=what)
    p.add_argument("tenant", help="the tenant's id")
    p.add_argument(
        "amount",
        type=whole_number_argument(1, MAX_BALANCE),
        help=f"whole credits, from 1 to {MAX_BALANCE:,}",
    )
    p.add_argument("--note", help="kept in the ledger beside the grant")
    p.set_defaults(func=cmd_grant)


def cmd_balance(args: argparse.Namespace) -> int:
    with app_connection(args, autocommit=True) as conn:
        print(balance(conn, args.tenant))
    return 0


def cmd_grant(args: argparse.Namespace) -> int:
    with app_connection(args, autocommit=True) as conn:
        add_credits(conn, args.tenant, args.amount, note=args.note)
        now = balance(conn, args.tenant)
    print(f"granted {args.amount} credit(s) to {args.tenant!r}; balance {now}")
    return 0
