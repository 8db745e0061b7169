"""An identity named in a path by its external id, which may hold any printable ASCII: a `/`
too (`team/backend`), even one that ends like a sub-route (`a/usage`)."""

from __future__ import annotations

import pytest

from tests.test_identities import key_of, new_identity


@pytest.mark.parametrize("external_id", ["team/backend", "a/usage", "acme corp/42/"])
def test_an_external_id_with_a_slash_is_read_updated_used_and_deleted(client, org, external_id):
    made = new_identity(client, org, external_id=external_id)
    path = f"/api/identities/external_id:{external_id}"
    read = client.get(path, auth=(org.sdk, ""))
    assert (read.status_code, read.json) == (200, made)
    changed = client.put(path, json={"name": "Backend"}, auth=(org.sdk, ""))
    assert (changed.status_code, changed.json["name"]) == (200, "Backend"), changed.json
    key = key_of(client, org.sdk, external_id)
    assert key["identity"] == {"id": made["id"], "external_id": external_id}
    usage = client.get(f"{path}/usage", auth=(org.sdk, ""))
    assert usage.status_code == 200, usage.json
    assert usage.json["identity"] == made["id"]
    listed = client.get("/api/keys", query_string={"identity": external_id}, auth=(org.sdk, ""))
    assert [k["key"] for k in listed.json["data"]] == [key["key"][:15] + "..."]
    client.delete(f"/api/keys/{key['key']}", auth=(org.sdk, ""))
    assert client.delete(path, auth=(org.sdk, "")).status_code == 204
    assert client.get(path, auth=(org.sdk, "")).status_code == 404


def test_usage_after_a_reference_is_the_usage_of_the_identity_it_names(client, org):
    """`external_id:a/usage` with both `a` and `a/usage` made: `/usage` after a reference that
    names an identity is that identity's usage; the identity `a/usage` is read by its id."""
    short = new_identity(client, org, external_id="a")
    long = new_identity(client, org, external_id="a/usage")
    usage = client.get("/api/identities/external_id:a/usage", auth=(org.sdk, ""))
    assert (usage.status_code, usage.json["identity"]) == (200, short["id"])
    read = client.get(f"/api/identities/{long['id']}", auth=(org.sdk, ""))
    assert read.json == long
    longer = client.get("/api/identities/external_id:a/usage/usage", auth=(org.sdk, ""))
    assert (longer.status_code, longer.json["identity"]) == (200, long["id"])


def test_a_slash_path_that_names_no_identity_is_not_found(client, org):
    for path in ("external_id:no/such", "external_id:no/such/usage", "id_x/y"):
        answer = client.get(f"/api/identities/{path}", auth=(org.sdk, ""))
        assert (answer.status_code, answer.json["code"]) == (404, "not_found"), path


def test_a_percent_encoded_slash_names_the_same_identity(client, org):
    made = new_identity(client, org, external_id="acme corp/42")
    read = client.get("/api/identities/external_id:acme%20corp%2F42", auth=(org.sdk, ""))
    assert (read.status_code, read.json) == (200, made)


def test_a_taken_external_id_is_refused_naming_the_identity_that_has_it(client, org):
    holder = new_identity(client, org, external_id="team/backend")
    other = new_identity(client, org, external_id="team/frontend")
    for answer in (
        client.post("/api/identities", json={"external_id": "team/backend"}, auth=(org.sdk, "")),
        client.put(
            f"/api/identities/{other['id']}",
            json={"external_id": "team/backend"},
            auth=(org.sdk, ""),
        ),
    ):
        assert (answer.status_code, answer.json["code"]) == (409, "identity_exists")
        assert answer.json["identity"] == holder["id"]
        assert holder["id"] in answer.json["detail"]
