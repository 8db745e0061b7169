"""The connection reads run on (app/storage/reads.py): each thread keeps one from the pool between
requests, closes it when the thread ends (it reads in autocommit: no write may get it), and
replaces one the database dropped without the client noticing."""

from __future__ import annotations

import gc
import sqlite3
import threading

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

from app.extensions import db
from tests.databases import needs_postgresql


def test_a_thread_keeps_one_connection_for_its_reads_across_requests(app, client, org):
    auth = (org.sdk, "")
    assert client.get("/api/keys", auth=auth).status_code == 200  # first use: written
    with app.app_context():
        engine = db.engine
    taken = []  # from the pool: none, once the thread holds its own
    event.listen(engine, "checkout", lambda *_: taken.append(1))
    for _ in range(3):
        assert client.get("/api/keys", auth=auth).status_code == 200
    assert taken == []


def test_the_reads_connection_leaves_the_pool_to_the_writes(make_app, database_url, org):
    """A pool of one: the thread's reads connection, kept between requests, is not one of
    the pool's, so a write still gets a connection (else it would wait, then fail)."""
    engine_options = {"hide_parameters": True, "pool_size": 1, "max_overflow": 0}
    app = make_app(
        SQLALCHEMY_DATABASE_URI=database_url,
        SQLALCHEMY_ENGINE_OPTIONS=engine_options | {"pool_timeout": 2},
    )
    client = app.test_client()
    auth = (org.sdk, "")
    assert client.get("/api/keys", auth=auth).status_code == 200
    body = {"name": "written", "kind": "custom", "scopes": ["site:read"]}
    assert client.post("/api/keys", json=body, auth=auth).status_code == 201
    assert client.get("/api/keys", auth=auth).json["total_count"] == 3


def in_autocommit(dbapi_connection) -> bool:
    if isinstance(dbapi_connection, sqlite3.Connection):
        return dbapi_connection.isolation_level is None
    return dbapi_connection.autocommit


# The usage counter's batch (every USAGE_FLUSH_SECONDS) takes a connection of the pool: on a
# loaded machine the test outlasts the default 10 s and would count that one among its own.
@pytest.mark.parametrize("app_config", [{"USAGE_FLUSH_SECONDS": 3600}], ids=["no-batch"])
def test_a_thread_that_ends_leaves_its_reads_connection_to_no_write(app, org):
    """A threaded server's thread per request: the reads' connection (in autocommit) is
    closed with its thread, not handed to a write, which needs its transaction."""
    with app.app_context():
        engine = db.engine
    answers = []

    def serve_one_request() -> None:
        answers.append(app.test_client().get("/api/keys", auth=(org.sdk, "")).status_code)

    checked_out = engine.pool.checkedout()
    for _ in range(3):
        thread = threading.Thread(target=serve_one_request)
        thread.start()
        thread.join()
        gc.collect()
        assert engine.pool.checkedout() == checked_out
    assert answers == [200, 200, 200]
    taken = [engine.raw_connection() for _ in range(engine.pool.size())]
    try:
        assert not [c for c in taken if in_autocommit(c.dbapi_connection)]
    finally:
        for connection in taken:
            connection.close()


@needs_postgresql
def test_a_read_on_a_connection_the_server_dropped_is_served_on_a_new_one(
    app, client, org, database_url
):
    auth = (org.sdk, "")
    assert client.get("/api/keys", auth=auth).status_code == 200
    # As a restarted server does: every connection to the service's database is closed.
    name = make_url(database_url).database
    admin = create_engine(database_url)
    try:
        with admin.connect() as connection:
            dropped = connection.execute(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            ).scalar_one()
    finally:
        admin.dispose()
    assert dropped >= 1
    response = client.get("/api/keys", auth=auth)
    assert response.status_code == 200, response.json
    assert client.get(f"/api/keys/{response.json['data'][0]['key']}", auth=auth).status_code == 200
