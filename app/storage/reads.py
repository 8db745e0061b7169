"""The reads every request makes (the key lookup, a key, a page and its count): SELECTs built
once with SQLAlchemy Core, compiled once per database dialect, run on the database
driver's cursor.

SQLAlchemy's Connection.execute costs four times the query it runs (an execution context
and a result object per statement), and a pool checkout and return per request cost more
than a GET's two queries (bench/README.md). So a read costs the driver's execute and the
dialect's own conversions (SQLite's text times to datetimes, say), on a connection each
thread takes from the engine's pool once and keeps, in autocommit.

What this path keeps from SQLAlchemy: the engine's pool, the dialect's SQL, parameter and
result conversions, and its exceptions: a database that does not answer raises
sqlalchemy.exc.OperationalError, which app/http/errors.py turns into 503. A connection the
database dropped (a restarted PostgreSQL) leaves the pool and the read runs once more on a
new one. What it leaves out: the engine's execute events and echo, which see writes only.
Writes go through db.session, which commits them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from flask import Flask, current_app
from sqlalchemy import exc
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.sql import Select

from app.extensions import db

T = TypeVar("T")


class _Compiled:
    """A statement's SQL for one dialect, and how its parameters and rows are converted."""

    def __init__(self, statement: Select, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)
        self.sql = compiled.string
        binds = {name: bind for bind, name in compiled.bind_names.items()}
        if any(bind.expanding or bind.literal_execute for bind in binds.values()):
            raise ValueError("a read's parameters are sent as they are: no IN lists to expand")
        self.names = list(compiled.positiontup or binds)
        # Per parameter: the name of the caller's value and the dialect's conversion of
        # it, or (None, the statement's own literal, converted here once, None).
        self.binds = []
        for name in self.names:
            bind = binds[name]
            convert = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if bind.required:
                self.binds.append((name, None, convert))
            else:
                own = bind.value if convert is None else convert(bind.value)
                self.binds.append((None, own, None))
        self.positional = compiled.positiontup is not None
        self.columns = [
            (index, processor)
            for index, column in enumerate(statement.selected_columns)
            if (processor := column.type.dialect_impl(dialect).result_processor(dialect, None))
        ]

    def parameters(self, values: Mapping[str, Any]) -> tuple | dict:
        sent = [
            own if name is None else values[name] if convert is None else convert(values[name])
            for name, own, convert in self.binds
        ]
        return tuple(sent) if self.positional else dict(zip(self.names, sent, strict=True))


class Read:
    """A SELECT to run with `rows(parameters)`; made once, where the statement is defined."""

    def __init__(self, statement: Select) -> None:
        self.statement = statement
        self._compiled: WeakKeyDictionary[Dialect, _Compiled] = WeakKeyDictionary()
        self._last: tuple[Dialect | None, _Compiled | None] = (None, None)

    def compiled(self, dialect: Dialect) -> _Compiled:
        last_dialect, compiled = self._last  # one application's, nearly always
        if last_dialect is not dialect:
            compiled = self._compiled.get(dialect)
            if compiled is None:
                compiled = self._compiled[dialect] = _Compiled(self.statement, dialect)
            self._last = (dialect, compiled)
        return compiled

    def rows(self, parameters: Mapping[str, Any], into: Callable[[list], T] = tuple) -> list[T]:
        """Every row, converted as SQLAlchemy would: what `into` makes of the list of its
        values, a tuple unless said (a Key, say: one copy of each row, not two)."""
        held = _held()
        compiled = self.compiled(held.engine.dialect)
        rows = _run(held, compiled.sql, compiled.parameters(parameters))
        columns = compiled.columns
        if not columns:
            return rows if into is tuple else [into(list(row)) for row in rows]
        made = []
        for row in rows:
            values = list(row)
            for index, convert in columns:
                values[index] = convert(values[index])
            made.append(into(values))
        return made

    def first(self, parameters: Mapping[str, Any], into: Callable[[list], T] = tuple) -> T | None:
        rows = self.rows(parameters, into)
        return rows[0] if rows else None


class _Held:
    """A thread's connection for reads, its own: opened by the engine's pool at the
    thread's first read, then detached from it, so that the pool's connections stay for
    the writes; kept from one request to the next (a checkout and return per request cost
    more than both of a GET's queries). It reads in autocommit: each read is a transaction
    of its own that sees every commit before it, and none is left open between requests.
    Released, or dropped with its thread (a threaded server's thread per request), it is
    closed."""

    connection: Any = None  # until the pool gives one

    def __init__(self, app: Flask, engine: Engine) -> None:
        self.app = app
        self.engine = engine
        self.connection = engine.raw_connection()
        self.connection.detach()
        engine.dialect.set_isolation_level(self.connection.dbapi_connection, "AUTOCOMMIT")
        self.cursor = self.connection.cursor()

    def release(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.close()

    __del__ = release


class _Thread(threading.local):
    held: _Held | None = None


_thread = _Thread()


def _held() -> _Held:
    """This thread's connection for reads, to the current application's database."""
    app = current_app._get_current_object()
    held = _thread.held
    if held is None or held.app is not app:
        release()  # none yet, or another application's
        engine = db.engine
        try:
            held = _thread.held = _Held(app, engine)
        except engine.dialect.loaded_dbapi.Error as error:  # closed by _Held.__del__
            raise _translated(engine, error, None) from error
    return held


def _run(held: _Held, sql: str, values: tuple | dict, retry: bool = True) -> list[tuple]:
    """The rows of `sql` on the thread's connection; once more on a new connection if the
    database dropped that one (reads change nothing, so running one twice is safe)."""
    try:
        held.cursor.execute(sql, values)
        return held.cursor.fetchall()  # all: a statement left open holds SQLite's snapshot
    except held.engine.dialect.loaded_dbapi.Error as error:
        engine = held.engine
        dbapi_connection = held.connection.dbapi_connection
        if retry and engine.dialect.is_disconnect(error, dbapi_connection, held.cursor):
            release()
            return _run(_held(), sql, values, retry=False)
        raise _translated(engine, error, sql) from error


def _translated(engine: Engine, error: Exception, sql: str | None) -> Exception:
    """The driver's error as SQLAlchemy raises it: OperationalError and the rest, with no
    parameter in its message."""
    dbapi_error = engine.dialect.loaded_dbapi.Error
    return exc.DBAPIError.instance(sql, None, error, dbapi_error, hide_parameters=True)


def release() -> None:
    """Close this thread's connection for reads; the next read takes a new one."""
    held, _thread.held = _thread.held, None
    if held is not None:
        held.release()
