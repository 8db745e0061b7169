"""The work one request gives the database, counted by statement, not by time: the auth
lookup is one query, a read writes nothing while last_used is fresh, a list page is one
count and one page query, and no query runs per row."""

from __future__ import annotations

import pytest


def writes(seen: list[str]) -> list[str]:
    return [s for s in seen if s.startswith(("INSERT", "UPDATE", "DELETE"))]


def test_authenticated_get_is_two_selects_once_last_used_is_fresh(client, org, statements):
    auth = (org.sdk, "")
    reference = client.get("/api/keys", auth=auth).json["data"][0]["key"]
    with statements() as seen:
        assert client.get(f"/api/keys/{reference}", auth=auth).status_code == 200
    assert len(seen) == 2
    assert writes(seen) == []
    assert "WHERE API_KEYS.DIGEST =" in seen[0]


def test_first_use_writes_last_used_once(client, org, statements):
    with statements() as seen:
        assert client.get("/api/keys?page_size=1", auth=(org.sdk, "")).status_code == 200
    assert len(writes(seen)) == 1
    assert writes(seen)[0].startswith("UPDATE API_KEYS SET LAST_USED")


@pytest.mark.parametrize("keys", [3, 60])
def test_a_list_page_is_one_count_and_one_page_query_whatever_its_size(
    client, org, make_key, statements, keys
):
    for number in range(keys):
        make_key(name=f"key {number}")
    auth = (org.sdk, "")
    client.get("/api/keys", auth=auth)  # the first use is written; later ones are not
    with statements() as seen:
        body = client.get("/api/keys?page_size=200", auth=auth).json
    assert len(body["data"]) == keys + 2
    assert len(seen) == 3
    assert writes(seen) == []
    assert "COUNT(*)" in seen[1]
    assert "ORDER BY API_KEYS.CREATED, API_KEYS.IDENTIFIER" in seen[2]


def test_a_page_past_the_end_asks_only_for_the_count(client, org, statements):
    auth = (org.sdk, "")
    client.get("/api/keys", auth=auth)
    with statements() as seen:
        assert client.get("/api/keys?page=9", auth=auth).json["data"] == []
    assert len(seen) == 2
