"""The connection reads run on (app/reads.py): each thread keeps one from the pool between
requests, leaves none checked out when it ends, and replaces one the database dropped
without the client noticing."""

from __future__ import annotations

import gc
import threading

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.extensions import db
from tests.databases import needs_postgresql


def test_a_thread_keeps_one_connection_for_its_reads_across_requests(app, client, org):
    with app.app_context():
        pool = db.engine.pool
    auth = (org.sdk, "")
    for _ in range(3):
        assert client.get("/api/keys", auth=auth).status_code == 200
        assert pool.checkedout() == 1  # held for the next request, not one per request


def test_a_thread_that_ends_leaves_no_connection_checked_out(app, org):
    with app.app_context():
        pool = db.engine.pool
    answers = []

    def serve_one_request() -> None:  # as a threaded server does, a thread per request
        answers.append(app.test_client().get("/api/keys", auth=(org.sdk, "")).status_code)

    checked_out = pool.checkedout()
    for _ in range(3):
        thread = threading.Thread(target=serve_one_request)
        thread.start()
        thread.join()
        gc.collect()
        assert pool.checkedout() == checked_out
    assert answers == [200, 200, 200]


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
