"""When the database does not answer, the key API says so with 503 and Retry-After in the
problem shape (a client may retry), never a 500 and never a detail of the database."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app import create_app
from app.domain.keyformat import identifier_of
from app.extensions import db
from tests.databases import needs_postgresql

UNREACHABLE = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:1/test?connect_timeout=2",
    "sqlite": "sqlite:////nonexistent-directory/api-keys.sqlite3",
}
KEY = "ak_DVIJcZUXMfmeznSOa3WWtlPqvGQLz9P377d76K01pTtI0KIp3P"  # well formed: reaches the query


@pytest.fixture(params=sorted(UNREACHABLE))
def down(request):
    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": UNREACHABLE[request.param]})
    yield app.test_client()
    with app.app_context():
        db.engine.dispose()


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/keys"), ("GET", f"/api/keys/{KEY}"), ("DELETE", "/api/keys/ak_x")],
)
def test_a_key_request_while_the_database_is_down_gets_503_with_retry_after(down, method, path):
    response = down.open(path, method=method, auth=(KEY, ""))
    assert response.status_code == 503, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    assert response.headers["Retry-After"] == "1"
    assert response.json["code"] == "unavailable"
    text = response.get_data(as_text=True)
    for leak in ("sqlite", "psycopg", "127.0.0.1", "SELECT", "Traceback", KEY):
        assert leak not in text


def test_the_log_names_the_failure_without_the_key(down, caplog):
    down.get("/api/keys", auth=(KEY, ""))
    assert "the database did not answer: OperationalError" in caplog.text
    assert KEY not in caplog.text


@needs_postgresql
def test_postgresql_statements_have_lock_and_statement_timeouts(app):
    with app.app_context():
        assert db.session.scalar(text("SHOW lock_timeout")) == "5s"
        assert db.session.scalar(text("SHOW statement_timeout")) == "10s"


@needs_postgresql
def test_a_row_lock_held_too_long_ends_in_503_not_a_hung_worker(database_url, org, make_key):
    """The URL's own options win over the defaults: here a 0.3 s lock wait, to be quick."""
    identifier = identifier_of(make_key(name="locked elsewhere"))
    url = make_url(database_url).update_query_dict({"options": "-c lock_timeout=300"})
    impatient = create_app(
        {"TESTING": True, "SQLALCHEMY_DATABASE_URI": url.render_as_string(hide_password=False)}
    )
    client = impatient.test_client()
    other = create_engine(database_url)
    try:
        with other.begin() as holder:
            holder.execute(
                text("SELECT id FROM api_keys WHERE identifier = :i FOR UPDATE"), {"i": identifier}
            )
            response = client.delete(f"/api/keys/{identifier}", auth=(org.sdk, ""))
        assert response.status_code == 503, response.json
        assert response.headers["Retry-After"] == "1"
        # The lock is gone: the same delete now succeeds.
        assert client.delete(f"/api/keys/{identifier}", auth=(org.sdk, "")).status_code == 204
    finally:
        other.dispose()
        with impatient.app_context():
            db.engine.dispose()


def test_a_missing_table_is_a_fault_of_the_service_not_a_503(app, client, org, database):
    app.config["PROPAGATE_EXCEPTIONS"] = False  # answer as in production, not raise
    with closing(sqlite3.connect(database)) as other:
        other.execute("ALTER TABLE api_keys RENAME TO api_keys_gone")
    response = client.get("/api/keys", auth=(org.sdk, ""))
    assert response.status_code == 500, response.json
    assert response.json["code"] == "internal_error"
    assert "Retry-After" not in response.headers


def test_a_write_that_finds_no_pooled_connection_free_gets_503(make_app, database_url, org):
    """Every connection of the pool busy past pool_timeout: 503 with Retry-After, as for a
    database that does not answer, not a 500."""
    options = {"hide_parameters": True, "pool_size": 1, "max_overflow": 0, "pool_timeout": 0.2}
    app = make_app(SQLALCHEMY_DATABASE_URI=database_url, SQLALCHEMY_ENGINE_OPTIONS=options)
    client = app.test_client()
    auth = (org.sdk, "")
    assert client.get("/api/keys", auth=auth).status_code == 200
    with app.app_context():
        busy = db.engine.raw_connection()  # the pool's only connection
    try:
        body = {"name": "waiting", "kind": "custom", "scopes": ["site:read"]}
        response = client.post("/api/keys", json=body, auth=auth)
    finally:
        busy.close()
    assert response.status_code == 503, response.json
    assert response.headers["Retry-After"] == "1"
    assert response.json["code"] == "unavailable"
    assert client.post("/api/keys", json=body, auth=auth).status_code == 201
