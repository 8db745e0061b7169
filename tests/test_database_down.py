"""When the database does not answer, the key API says so with 503 and Retry-After in the
problem shape (a client may retry), never a 500 and never a detail of the database."""

from __future__ import annotations

import pytest

from app import create_app
from app.extensions import db

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
