"""Get and delete (spec section 4; docs/design.md, "Keys"): the three reference forms,
404 for anything else, and a delete that revokes at once and for good."""

from __future__ import annotations

import pytest

from app.domain.keyformat import identifier_of, new_key
from tests.key_fields import KEY_FIELDS

PROBLEM_JSON = "application/problem+json"

# The three ways `:key` in a path may name a key: name -> function(full key) -> reference
FORMS = {
    "identifier": identifier_of,
    "shown": lambda full_key: identifier_of(full_key) + "...",
    "full key": lambda full_key: full_key,
}


def assert_problem(response, status: int, code: str) -> None:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == PROBLEM_JSON
    assert response.json["status"] == status
    assert response.json["code"] == code


def unknown_references(org) -> dict[str, str]:
    """References that name no key (one of them is close to an existing key)."""
    unknown = new_key("ak_")[1]
    sdk_identifier = identifier_of(org.sdk)
    bad_checksum = org.sdk[:-1] + ("A" if org.sdk[-1] != "A" else "B")
    return {
        "unknown identifier": identifier_of(unknown),
        "unknown shown": identifier_of(unknown) + "...",
        "unknown full key": unknown,
        "existing key with bad checksum": bad_checksum,
        "existing identifier plus a character": sdk_identifier + "x",
        "existing identifier minus a character": sdk_identifier[:-1],
        "two dots": sdk_identifier + "..",
        "four dots": sdk_identifier + "....",
        "unicode ellipsis": sdk_identifier + "\u2026",
        "prefix only": "ak_",
        "not a key": "not-a-key",
        "very long": "a" * 1000,
    }


UNKNOWN = [
    "unknown identifier",
    "unknown shown",
    "unknown full key",
    "existing key with bad checksum",
    "existing identifier plus a character",
    "existing identifier minus a character",
    "two dots",
    "four dots",
    "unicode ellipsis",
    "prefix only",
    "not a key",
    "very long",
]


# --- get ------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", list(FORMS))
def test_get_by_each_reference_form_returns_the_key(client, org, make_key, form):
    target = make_key(name="target", scopes=["site:read", "monitor:read"])
    response = client.get(f"/api/keys/{FORMS[form](target)}", auth=(org.sdk, ""))
    assert response.status_code == 200, response.json
    body = response.json
    assert tuple(body) == KEY_FIELDS
    assert body["key"] == identifier_of(target) + "..."
    assert (body["name"], body["kind"], body["immutable"]) == ("target", "custom", False)
    assert body["scopes"] == ["monitor:read", "site:read"]
    assert body["last_used"] is None
    assert body["created"] == body["updated"]
    assert body["created"].endswith("Z")


def test_all_three_reference_forms_name_the_same_key(client, org, make_key):
    target = make_key(name="target")
    bodies = [
        client.get(f"/api/keys/{form(target)}", auth=(org.sdk, "")).json for form in FORMS.values()
    ]
    assert bodies[0] == bodies[1] == bodies[2]


@pytest.mark.parametrize("form", list(FORMS))
def test_get_never_shows_the_full_key(client, org, form):
    response = client.get(f"/api/keys/{FORMS[form](org.sdk)}", auth=(org.sdk, ""))
    assert response.status_code == 200
    assert response.json["key"] == identifier_of(org.sdk) + "..."
    assert org.sdk not in response.get_data(as_text=True)


def test_get_the_location_of_a_created_key(client, org):
    body = {"name": "fresh", "kind": "custom", "scopes": ["site:read"]}
    created = client.post("/api/keys", json=body, auth=(org.sdk, ""))
    assert created.status_code == 201, created.json
    got = client.get(created.headers["Location"], auth=(org.sdk, ""))
    assert got.status_code == 200
    assert got.json == created.json | {"key": identifier_of(created.json["key"]) + "..."}


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
@pytest.mark.parametrize("reference", UNKNOWN)
def test_unknown_reference_is_404_not_found(client, org, method, reference):
    path = f"/api/keys/{unknown_references(org)[reference]}"
    json = {"name": "renamed"} if method == "PUT" else None
    response = client.open(path, method=method, json=json, auth=(org.sdk, ""))
    assert_problem(response, 404, "not_found")
    assert client.get("/api/keys", auth=(org.sdk, "")).json["total_count"] == 2


# --- delete ---------------------------------------------------------------------------------


@pytest.mark.parametrize("form", list(FORMS))
def test_delete_by_each_reference_form_is_204_with_empty_body(client, org, make_key, form):
    target = make_key(name="target")
    response = client.delete(f"/api/keys/{FORMS[form](target)}", auth=(org.sdk, ""))
    assert response.status_code == 204
    assert response.data == b""


@pytest.mark.parametrize("form", list(FORMS))
def test_deleted_key_is_gone_for_get_under_every_form(client, org, make_key, form):
    target = make_key(name="target")
    assert client.delete(f"/api/keys/{FORMS[form](target)}", auth=(org.sdk, "")).status_code == 204
    for reference in FORMS.values():
        response = client.get(f"/api/keys/{reference(target)}", auth=(org.sdk, ""))
        assert_problem(response, 404, "not_found")


@pytest.mark.parametrize("second", list(FORMS))
@pytest.mark.parametrize("first", list(FORMS))
def test_second_delete_of_the_same_key_is_404(client, org, make_key, first, second):
    target = make_key(name="target")
    assert client.delete(f"/api/keys/{FORMS[first](target)}", auth=(org.sdk, "")).status_code == 204
    again = client.delete(f"/api/keys/{FORMS[second](target)}", auth=(org.sdk, ""))
    assert_problem(again, 404, "not_found")


def test_update_of_a_deleted_key_is_404(client, org, make_key):
    target = make_key(name="target")
    assert client.delete(f"/api/keys/{target}", auth=(org.sdk, "")).status_code == 204
    response = client.put(
        f"/api/keys/{identifier_of(target)}", json={"name": "back"}, auth=(org.sdk, "")
    )
    assert_problem(response, 404, "not_found")


def test_deleted_key_leaves_the_list(client, org, make_key):
    target = make_key(name="target")
    keep = make_key(name="keep")
    assert (
        client.delete(f"/api/keys/{identifier_of(target)}", auth=(org.sdk, "")).status_code == 204
    )
    body = client.get("/api/keys", auth=(org.sdk, "")).json
    assert body["total_count"] == 3
    shown = {item["key"] for item in body["data"]}
    assert identifier_of(target) + "..." not in shown
    assert identifier_of(keep) + "..." in shown


@pytest.mark.parametrize("form", list(FORMS))
def test_deleted_key_cannot_authenticate_at_once(client, org, make_key, form):
    target = make_key(name="target")
    assert client.get("/api/keys", auth=(target, "")).status_code == 200
    assert client.delete(f"/api/keys/{FORMS[form](target)}", auth=(org.sdk, "")).status_code == 204
    response = client.get("/api/keys", auth=(target, ""))
    assert_problem(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"] == 'Basic realm="api"'


def test_delete_leaves_the_other_keys_working(client, org, make_key):
    target = make_key(name="target")
    keep = make_key(name="keep")
    assert (
        client.delete(f"/api/keys/{identifier_of(target)}", auth=(org.sdk, "")).status_code == 204
    )
    assert client.get("/api/keys", auth=(keep, "")).status_code == 200
    assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200
    assert client.get(f"/api/keys/{identifier_of(keep)}", auth=(org.sdk, "")).status_code == 200
