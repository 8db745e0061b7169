"""The work one request gives the database, counted by statement, not by time: the auth
lookup is one query the first time a worker sees a key and none after (app/access/seen.py),
a read writes nothing while last_used is fresh, a list page is one total (the stored count,
not a count of the keys) and one page query, and no query runs per row."""

from __future__ import annotations

import sys
from datetime import datetime

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.storage import pages
from app.storage.models import ApiKey
from app.usage import counter as usage_counter


def writes(seen: list[str]) -> list[str]:
    return [s for s in seen if s.startswith(("INSERT", "UPDATE", "DELETE"))]


@pytest.fixture
def app_config() -> dict:
    """Usage is counted (docs/design.md, "Usage"), and its thread writes nothing during a test."""
    return {"USAGE_ENABLED": True, "USAGE_FLUSH_SECONDS": 3600}


def test_authenticated_get_is_one_select_once_its_key_is_seen(client, org, statements):
    auth = (org.sdk, "")
    reference = client.get("/api/keys", auth=auth).json["data"][0]["key"]
    made = {"name": "x", "kind": "custom", "scopes": ["monitor:read"]}
    assert client.post("/api/keys", json=made, auth=auth).status_code == 201
    with statements() as seen:  # after a write, the key is read again once
        assert client.get(f"/api/keys/{reference}", auth=auth).status_code == 200
    assert len(seen) == 2
    assert "WHERE API_KEYS.DIGEST =" in seen[0]
    with statements() as seen:
        assert client.get(f"/api/keys/{reference}", auth=auth).status_code == 200
    assert len(seen) == 1
    assert writes(seen) == []
    assert "WHERE API_KEYS.IDENTIFIER =" in seen[0]


def test_a_check_reads_nothing_once_its_keys_are_seen(client, org, statements):
    """Forward auth's organization name, and introspection's name and creation, come with
    the read that finds the key: once per key a worker sees, none after."""
    for _ in range(2):  # the first uses are written; later ones are not
        client.get("/api/forward-auth", auth=(org.telemetry, ""))
        client.post("/api/introspect", json={"token": org.telemetry}, auth=(org.sdk, ""))
    with statements() as seen:
        answer = client.get("/api/forward-auth", auth=(org.telemetry, ""))
        assert answer.status_code == 204
        assert answer.headers["X-Api-Key-Organization"] == org.name
        answer = client.post("/api/introspect", json={"token": org.telemetry}, auth=(org.sdk, ""))
        assert answer.json["active"] is True
    assert seen == []


def test_counting_usage_adds_no_statement_to_a_request(client, org, make_key, statements):
    key = make_key(scopes=("monitor:read", "site:read"))
    forward = "/api/forward-auth?scope=monitor:read&scope=site:read"
    client.get(forward, auth=(key, ""))  # the first uses are written; later ones are not
    client.get("/api/keys", auth=(org.telemetry, ""))
    with statements() as seen:
        assert client.get(forward, auth=(key, "")).status_code == 204
        assert client.get("/api/forward-auth?scope=site:write", auth=(key, "")).status_code == 403
        assert client.get("/api/keys", auth=(org.telemetry, "")).status_code == 403
    assert writes(seen) == []
    assert not [s for s in seen if "KEY_USAGE" in s]
    usage_counter.flush(client.application)  # and the uses were counted, in memory
    assert client.get(f"/api/keys/{key}/usage", auth=(org.sdk, "")).json["total"] == {
        "allowed": 2,
        "refused": {"forbidden": 1},
    }


def test_first_use_writes_last_used_once(client, org, statements):
    with statements() as seen:
        assert client.get("/api/keys?page_size=1", auth=(org.sdk, "")).status_code == 200
    assert len(writes(seen)) == 1
    assert writes(seen)[0].startswith("UPDATE API_KEYS SET LAST_USED")


@pytest.mark.parametrize("keys", [3, 60])
def test_a_list_page_is_one_total_and_one_page_query_whatever_its_size(
    client, org, make_key, statements, keys
):
    for number in range(keys):
        make_key(name=f"key {number}")
    auth = (org.sdk, "")
    client.get("/api/keys", auth=auth)  # the first use is written; later ones are not
    with statements() as seen:
        body = client.get("/api/keys?page_size=200", auth=auth).json
    assert len(body["data"]) == keys + 2
    assert len(seen) == 2
    assert writes(seen) == []
    assert "FROM KEY_COUNTS" in seen[0] and "COUNT(" not in seen[0]
    assert "ORDER BY API_KEYS.CREATED, API_KEYS.IDENTIFIER" in seen[1]


def test_a_page_past_the_end_asks_only_for_the_total(client, org, statements):
    auth = (org.sdk, "")
    client.get("/api/keys", auth=auth)
    with statements() as seen:
        assert client.get("/api/keys?page=9", auth=auth).json["data"] == []
    assert len(seen) == 1


def python_calls(request) -> int:
    """The Python and C function calls made while `request()` runs (sys.setprofile)."""
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        request()
    finally:
        sys.setprofile(None)
    return calls


# The Python-level work of one request, in function calls, per database driver: ceilings
# 5% above what the code made when they were set (SQLite: a GET 1,596 calls, a list page
# of 50 2,159; PostgreSQL: 1,707 and 2,318; the count does not vary between runs; a list
# page of 50 since keys carry policy (two JSON columns decoded per key): SQLite 3,102,
# PostgreSQL 3,929; since a key's body is built by one function, dump_key, and a page's
# rows are made into keys in one pass: a GET 1,198, a list page 1,768; PostgreSQL 1,315
# and 1,887; since a valid key's attempt is given back where its request is counted: a GET
# 1,178, a list page 1,748; PostgreSQL 1,296 and 1,867), so that
# an extra schema built per request or a dump through marshmallow's per-field machinery
# fails here, whatever the machine's speed. (An extra query adds only ~20 calls: the
# statement counts above catch it.) To update: run these tests,
# read the figure from the failure (or print `python_calls(...)`), set the ceiling 5%
# above it, and say in the commit why a request now costs more.
CEILINGS = {"sqlite": {"get": 1_237, "list": 1_835}, "postgresql": {"get": 1_361, "list": 1_960}}


def ceiling(app, request: str) -> int:
    with app.app_context():
        return CEILINGS[db.engine.dialect.name][request]


def test_an_authenticated_get_stays_cheap_in_python_calls(app, client, org):
    auth = (org.sdk, "")
    reference = client.get("/api/keys", auth=auth).json["data"][0]["key"]
    client.get(f"/api/keys/{reference}", auth=auth)  # caches warm: statements compiled
    calls = python_calls(lambda: client.get(f"/api/keys/{reference}", auth=auth))
    assert calls <= ceiling(app, "get"), calls


def test_a_list_page_of_50_stays_cheap_in_python_calls(app, client, org, make_key):
    for number in range(50):
        make_key(name=f"key {number}")
    auth = (org.sdk, "")
    client.get("/api/keys", auth=auth)
    response = {}
    calls = python_calls(lambda: response.update(client.get("/api/keys", auth=auth).json))
    assert len(response["data"]) == 50
    assert calls <= ceiling(app, "list"), calls


# The list filters' counts read an index of the filtered column, never the table: at
# 100,000 keys that is what keeps them fast (bench: unused_since_50_big). SQLite's plan is
# fixed by the schema; PostgreSQL's follows its statistics (its plans at 100,000 keys are
# in bench/README.md).
FILTERS = [
    ({"state": "active"}, "ix_api_keys_expiry"),
    ({"state": "expired"}, "ix_api_keys_expiry"),
    ({"unused_since": datetime(2999, 1, 1)}, "ix_api_keys_last_used"),
    ({"metadata": {"team": "team-7"}}, "ix_key_metadata_lookup"),  # bench: list_metadata_50_big
]


@pytest.mark.parametrize(("filters", "index"), FILTERS)
def test_a_filtered_count_reads_the_filtered_columns_index(app, org, filters, index):
    arguments = {"kind": None, "state": None, "unused_since": None} | filters
    with app.app_context():
        if db.engine.dialect.name != "sqlite":
            pytest.skip("PostgreSQL plans by statistics: see bench/README.md")
        statement = select(func.count()).select_from(ApiKey.__table__)
        statement = statement.where(pages.matching(1, **arguments))
        sql = str(statement.compile(db.engine, compile_kwargs={"literal_binds": True}))
        with db.engine.begin() as connection:
            plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}").all()
    details = " ".join(row[-1] for row in plan)
    assert f"USING COVERING INDEX {index}" in details, details
