"""A list page's total_count comes from key_counts, which triggers on api_keys keep
(migrations/versions/0002_key_counts.py): it must equal the keys there are, whoever
writes them, and however many write at once."""

from __future__ import annotations

import threading

from sqlalchemy import text

from app.extensions import db
from app.storage import reads
from tests.databases import needs_postgresql

ACTUAL = "SELECT organization_id, kind, count(*) FROM api_keys GROUP BY organization_id, kind"
STORED = "SELECT organization_id, kind, total FROM key_counts WHERE total <> 0"


def assert_counts_match(sql) -> None:
    assert sorted(sql(STORED)) == sorted(sql(ACTUAL))


def totals(client, auth) -> dict[str | None, int]:
    kinds = (None, "telemetry", "sdk_integration", "custom")
    return {
        kind: client.get("/api/keys", query_string={"kind": kind} if kind else {}, auth=auth).json[
            "total_count"
        ]
        for kind in kinds
    }


def test_totals_follow_creates_and_deletes_through_the_api(client, org, make_org, sql):
    auth = (org.sdk, "")
    other = make_org("other")  # its keys are not acme's
    assert totals(client, auth) == {None: 2, "telemetry": 1, "sdk_integration": 1, "custom": 0}
    made = []
    for number in range(5):
        body = {"name": f"k{number}", "kind": "custom", "scopes": ["site:read"]}
        made.append(client.post("/api/keys", json=body, auth=auth).json["key"])
    for full_key in made[:2]:
        assert client.delete(f"/api/keys/{full_key}", auth=auth).status_code == 204
    assert totals(client, auth) == {None: 5, "telemetry": 1, "sdk_integration": 1, "custom": 3}
    assert client.get("/api/keys", auth=(other.sdk, "")).json["total_count"] == 2
    assert_counts_match(sql)


def test_totals_follow_keys_written_outside_the_service(client, org, make_key, sql):
    """An operator's SQL (or another version of the service) is counted too."""
    auth = (org.sdk, "")
    make_key()
    sql("UPDATE api_keys SET kind = 'telemetry' WHERE kind = 'custom'")
    assert totals(client, auth) == {None: 3, "telemetry": 2, "sdk_integration": 1, "custom": 0}
    sql("DELETE FROM api_keys WHERE kind = 'telemetry'")
    assert totals(client, auth) == {None: 1, "telemetry": 0, "sdk_integration": 1, "custom": 0}
    assert_counts_match(sql)


def test_an_organization_whose_keys_were_deleted_can_be_deleted_with_its_counts(
    app, client, org, make_org, sql
):
    make_org("other")
    ((other,),) = sql("SELECT id FROM organizations WHERE name = 'other'")
    with app.app_context():  # the service's connections: SQLite's foreign keys on
        db.session.execute(text("DELETE FROM api_keys WHERE organization_id = :id"), {"id": other})
        db.session.execute(text("DELETE FROM organizations WHERE id = :id"), {"id": other})
        db.session.commit()
    assert sql("SELECT count(*) FROM key_counts WHERE organization_id = :id", id=other) == [(0,)]
    assert client.get("/api/keys", auth=(org.sdk, "")).json["total_count"] == 2


@needs_postgresql
def test_totals_follow_a_truncate(client, org, sql):
    sql("TRUNCATE api_keys CASCADE")  # with its keys' metadata and usage, which refer to them
    assert sql("SELECT count(*) FROM key_counts") == [(0,)]
    assert_counts_match(sql)


WRITERS = 4


def test_totals_stay_exact_under_concurrent_creates_and_deletes(app, org, sql):
    auth = (org.sdk, "")
    failures = []

    def write(number: int) -> None:
        try:
            write_keys(number)
        finally:
            reads.release()  # this thread's connection, before the thread ends

    def write_keys(number: int) -> None:
        client = app.test_client()
        for step in range(10):
            body = {"name": f"w{number}-{step}", "kind": "custom", "scopes": ["site:read"]}
            created = client.post("/api/keys", json=body, auth=auth)
            if created.status_code != 201:
                failures.append(created.status_code)
            elif step % 2:
                deleted = client.delete(f"/api/keys/{created.json['key']}", auth=auth)
                if deleted.status_code != 204:
                    failures.append(deleted.status_code)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert totals(app.test_client(), auth)[None] == 2 + WRITERS * 5
    assert_counts_match(sql)
