"""Databases the tests make for themselves: where the repository is, a scratch database made
afresh and dropped afterwards, a DSN for another database on the same server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ROOT = Path(__file__).resolve().parents[2]


def dsn_for(base: str, dbname: str) -> str:
    return make_conninfo(base, dbname=dbname)


@contextmanager
def scratch_database(server_dsn: str, name: str) -> Iterator[str]:
    """An empty database of this name on the server, made afresh; dropped afterwards."""
    drop = sql.SQL("drop database if exists {} (force)").format(sql.Identifier(name))
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(drop)
        admin.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        yield dsn_for(server_dsn, name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(drop)


@contextmanager
def cloned_database(server_dsn: str, name: str, template: Callable[[Any], str]) -> Iterator[str]:
    """A database of this name cloned from the template that ``template`` names, given an
    autocommit connection to the server; dropped afterwards."""
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("create database {} template {}").format(
                sql.Identifier(name), sql.Identifier(template(admin))
            )
        )
    try:
        yield dsn_for(server_dsn, name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("drop database if exists {} (force)").format(sql.Identifier(name))
            )


def database_name(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])
