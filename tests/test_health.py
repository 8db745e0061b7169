"""GET /healthz (docs/design.md, "The database and health"): no authentication; 200 {"status": "ok"}
when the database answers, 503 in the error shape when it does not."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from app.storage.database import upgrade

PROBLEM_FIELDS = {"type", "title", "status", "detail", "code"}


@pytest.fixture
def app_on(make_app):
    """Build apps on a database URL (or SQLite path) of the test's choice."""

    def make(database: str):
        url = database if "://" in database else f"sqlite:///{database}"
        return make_app(SQLALCHEMY_DATABASE_URI=url)

    return make


def assert_unavailable(response) -> None:
    assert response.status_code == 503, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    assert response.headers["Retry-After"] == "1"  # as every 503 of the service says
    body = response.json
    assert PROBLEM_FIELDS <= set(body) <= PROBLEM_FIELDS | {"errors"}, body
    assert body["status"] == 503
    assert isinstance(body["code"], str) and body["code"]
    assert isinstance(body["detail"], str) and body["detail"]
    assert "Traceback" not in response.get_data(as_text=True)


def test_healthz_without_authentication_is_200_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    assert response.json == {"status": "ok", "counts": "ok"}


def test_healthz_ignores_credentials_even_unknown_ones(client):
    response = client.get("/healthz", auth=("ak_not_a_key", ""))
    assert response.status_code == 200
    assert response.json == {"status": "ok", "counts": "ok"}


def test_healthz_is_503_when_the_database_cannot_be_opened(app_on, tmp_path):
    app = app_on(str(tmp_path / "no such directory" / "api-keys.sqlite3"))
    assert_unavailable(app.test_client().get("/healthz"))


def test_healthz_is_503_when_the_database_server_does_not_answer(app_on):
    """Nothing listens on port 1: a PostgreSQL URL whose server is down."""
    app = app_on("postgresql+psycopg://postgres@127.0.0.1:1/test?connect_timeout=2")
    assert_unavailable(app.test_client().get("/healthz"))


def test_healthz_is_503_when_the_tables_are_gone(app_on, new_database):
    url = new_database()
    app = app_on(url)
    upgrade(app)
    client = app.test_client()
    assert client.get("/healthz").status_code == 200
    engine = create_engine(url)
    with engine.begin() as connection:
        for table in (
            "webhook_deliveries",
            "webhook_events",
            "webhook_endpoints",
            "key_announcements",
            "audit_events",
            "key_counts",
            "key_metadata",
            "key_usage",
            "api_keys",
            "identities",
            "organizations",
        ):
            connection.execute(text(f"DROP TABLE {table}"))
    engine.dispose()
    assert_unavailable(client.get("/healthz"))


def test_healthz_recovers_once_the_database_answers_again(app_on, tmp_path):
    folder = tmp_path / "later"
    app = app_on(str(folder / "api-keys.sqlite3"))
    client = app.test_client()
    assert_unavailable(client.get("/healthz"))
    folder.mkdir()
    runner = app.test_cli_runner()
    assert runner.invoke(args=["org", "create", "acme"]).exit_code == 0
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json == {"status": "ok", "counts": "ok"}
