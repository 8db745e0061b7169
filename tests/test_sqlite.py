"""The embedded SQLite database tuned for several processes: WAL, a busy timeout and foreign
keys on every new connection, and writers that take the write lock when their transaction
starts, so that two writers wait for each other instead of failing."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError

from app.extensions import db
from tests.databases import sqlite_only

pytestmark = sqlite_only


def test_every_new_connection_has_wal_a_busy_timeout_foreign_keys_and_immediate_writes(app):
    with app.app_context():
        engine = db.engine
        connections = [engine.connect() for _ in range(2)]  # two distinct new connections
        try:
            for connection in connections:
                pragma = connection.exec_driver_sql
                assert pragma("PRAGMA journal_mode").scalar() == "wal"
                assert pragma("PRAGMA busy_timeout").scalar() == 5000
                assert pragma("PRAGMA synchronous").scalar() == 2  # FULL
                assert pragma("PRAGMA foreign_keys").scalar() == 1
                assert connection.connection.dbapi_connection.isolation_level == "IMMEDIATE"
        finally:
            for connection in connections:
                connection.close()


def test_a_write_request_opens_its_transaction_with_begin_immediate(app, client, org):
    statements: list[str] = []

    def trace(dbapi_connection, connection_record):
        dbapi_connection.set_trace_callback(statements.append)

    with app.app_context():
        db.engine.dispose()  # new connections, which the listener below sees
        event.listen(db.engine, "connect", trace)
    body = {"name": "written", "kind": "custom", "scopes": ["monitor:read"]}
    response = client.post("/api/keys", json=body, auth=(org.sdk, ""))
    assert response.status_code == 201, response.json
    inserts = [i for i, s in enumerate(statements) if s.startswith("INSERT INTO api_keys")]
    begins = [i for i, s in enumerate(statements) if s.startswith("BEGIN")]
    assert inserts and begins, statements
    assert statements[max(b for b in begins if b < inserts[0])] == "BEGIN IMMEDIATE"


def test_a_write_waits_for_another_process_holding_the_write_lock(client, database, org):
    holder = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.5, holder.execute, ["COMMIT"])
    released.start()
    try:
        body = {"name": "patient", "kind": "custom", "scopes": ["monitor:read"]}
        response = client.post("/api/keys", json=body, auth=(org.sdk, ""))
    finally:
        released.join()
        holder.close()
    assert response.status_code == 201, response.json


def test_reads_hold_no_snapshot_so_a_later_write_never_needs_an_upgrade(app, database, org):
    """A read, another process's commit, then a write on the same connection: the read
    opened no transaction (sqlite3's legacy mode), so the write starts fresh with BEGIN
    IMMEDIATE. Were the read inside a transaction, upgrading its stale snapshot would fail
    with "database is locked" (SQLITE_BUSY_SNAPSHOT) whatever the busy timeout."""
    with app.app_context(), db.engine.connect() as connection:
        before = connection.execute(text("SELECT count(*) FROM api_keys")).scalar()
        with closing(sqlite3.connect(database)) as other:
            other.execute("UPDATE api_keys SET name = 'renamed elsewhere'")
            other.commit()
        connection.execute(text("UPDATE api_keys SET name = 'renamed here'"))
        connection.commit()
        after = connection.execute(text("SELECT name FROM api_keys")).scalars().all()
    assert before == 2
    assert after == ["renamed here", "renamed here"]


@pytest.mark.parametrize("pragma", ["journal_mode=DELETE", "foreign_keys=OFF"])
def test_settings_come_back_on_a_new_connection(app, pragma):
    """Set on connect, not once: a pool that replaces a connection gets them again."""
    with app.app_context():
        with db.engine.connect() as connection:
            connection.exec_driver_sql(f"PRAGMA {pragma}")
        db.engine.dispose()
        with db.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def _write(connection, name: str) -> None:
    connection.execute(text("UPDATE api_keys SET name = :name"), {"name": name})


def test_writers_queue_for_their_turn_instead_of_polling_the_busy_handler(app, org):
    """With no busy timeout at all, a second writer fails at once with "database is
    locked" unless it waits in the writers' queue (database.QueuedConnection): there it
    wakes when the first commits, and writes after it."""
    order: list[str] = []
    with app.app_context():
        first, second = db.engine.connect(), db.engine.connect()
        try:
            for connection in (first, second):
                connection.exec_driver_sql("PRAGMA busy_timeout=0")
            _write(first, "first")  # holds the queue and SQLite's write lock

            def second_writer() -> None:
                _write(second, "second")
                order.append("second wrote")
                second.commit()

            thread = threading.Thread(target=second_writer)
            thread.start()
            thread.join(0.3)
            assert thread.is_alive(), "the second writer did not wait for its turn"
            order.append("first commits")
            first.commit()
            thread.join(5)
            assert not thread.is_alive()
            assert order == ["first commits", "second wrote"]
            names = second.execute(text("SELECT DISTINCT name FROM api_keys")).scalars()
            assert list(names) == ["second"]
        finally:
            first.close()
            second.close()


def test_a_thread_holding_the_queue_does_not_wait_for_itself(app):
    """A second connection of the same thread writes outside the queue: SQLite's busy
    timeout refuses it, where waiting in the queue would wait forever."""
    with app.app_context():
        first, second = db.engine.connect(), db.engine.connect()
        try:
            second.exec_driver_sql("PRAGMA busy_timeout=50")
            _write(first, "first")
            with pytest.raises(OperationalError, match="database is locked"):
                _write(second, "second")
            second.rollback()
            first.commit()
        finally:
            first.close()
            second.close()


def test_a_rollback_and_a_closed_connection_leave_the_queue(app):
    with app.app_context():
        first, second = db.engine.connect(), db.engine.connect()
        try:
            second.exec_driver_sql("PRAGMA busy_timeout=0")
            _write(first, "rolled back")
            first.rollback()
            _write(first, "closed")
            first.invalidate()  # closes the driver's connection, mid-transaction
            done = threading.Event()

            def writer() -> None:
                _write(second, "written")
                second.commit()
                done.set()

            threading.Thread(target=writer).start()
            assert done.wait(5), "the queue was not left"
        finally:
            first.close()
            second.close()
