"""docs/operations.md's SQLite backup command, run while the service holds the database open with
recent writes still in the WAL file, gives a copy on which every key works."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from app import create_app
from app.extensions import db
from tests.databases import sqlite_only
from tests.processes import PROJECT, run

pytestmark = sqlite_only
OPERATIONS = PROJECT / "docs" / "operations.md"


def documented_backup_command() -> list[str]:
    """docs/operations.md's `.venv/bin/python -c ... instance/api-keys.sqlite3 backup.sqlite3`."""
    text = OPERATIONS.read_text()
    found = re.search(r"^\.venv/bin/python -c (.+?) \\\n\s+(.+)$", text, re.MULTILINE)
    assert found, "docs/operations.md shows no backup command"
    return ["python", "-c", *shlex.split(found.group(1)), *shlex.split(found.group(2))]


def test_the_documented_online_backup_holds_every_key(app, client, database, org, tmp_path):
    body = {"name": "backed up", "kind": "custom", "scopes": ["site:read"]}
    made = [client.post("/api/keys", json=body, auth=(org.sdk, "")).json["key"] for _ in range(3)]
    assert Path(f"{database}-wal").stat().st_size > 0  # the latest writes are in the WAL
    command = documented_backup_command()
    assert command[-2:] == ["instance/api-keys.sqlite3", "backup.sqlite3"]
    backup = tmp_path / "backup.sqlite3"
    command[0], command[-2:] = sys.executable, [database, str(backup)]
    run(command)
    restored = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{backup}"})
    try:
        restored_client = restored.test_client()
        for key in [org.sdk, *made]:
            assert restored_client.get(f"/api/keys/{key}", auth=(key, "")).status_code == 200
        listing = restored_client.get("/api/keys", auth=(org.sdk, "")).json
        assert listing["total_count"] == 5
    finally:
        with restored.app_context():
            db.engine.dispose()
