"""Serving the API never imports alembic or Flask-Migrate (10 MB per worker): they are
imported when migrations run, and `flask db` is still there for the operator. On SQLite, it
never imports PostgreSQL's dialect (2.4 MB per worker)."""

from __future__ import annotations

import sys

from tests.processes import run

SERVE_WITHOUT_MIGRATING = """
import sys
from app import create_app

app = create_app({"SQLALCHEMY_DATABASE_URI": sys.argv[1]})
client = app.test_client()
assert client.get("/healthz").status_code == 503  # no schema: the database is not upgraded
assert client.get("/api/keys").status_code == 401
loaded = sorted(m for m in sys.modules if m.startswith(tuple(sys.argv[2:])))
print(loaded)
"""


def test_serving_requests_imports_no_migration_code(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.sqlite3'}"
    completed = run(
        [sys.executable, "-c", SERVE_WITHOUT_MIGRATING, url, "alembic", "flask_migrate"]
    )
    assert completed.stdout.strip() == "[]"


def test_serving_on_sqlite_imports_no_postgresql_dialect(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.sqlite3'}"
    prefix = "sqlalchemy.dialects.postgresql"
    completed = run([sys.executable, "-c", SERVE_WITHOUT_MIGRATING, url, prefix])
    assert completed.stdout.strip() == "[]"


def test_flask_db_is_listed_and_answers(runner):
    assert "db" in runner.invoke(args=["--help"]).output
    result = runner.invoke(args=["db", "current"])
    assert result.exit_code == 0, result.output
