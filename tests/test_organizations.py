"""Organizations (spec section 1; docs/design.md, "Permissions"): a key of another organization does
not exist for the caller, and listing and counting stay within the caller's organization."""

from __future__ import annotations

import pytest

from app.domain.keyformat import identifier_of

PROBLEM_JSON = "application/problem+json"

# The three ways `:key` in a path may name a key: name -> function(full key) -> reference
FORMS = {
    "identifier": identifier_of,
    "shown": lambda full_key: identifier_of(full_key) + "...",
    "full key": lambda full_key: full_key,
}
# Requests on one key: name -> (method, JSON body)
ACTIONS = {
    "get": ("GET", None),
    "rename": ("PUT", {"name": "taken over"}),
    "rescope": ("PUT", {"scopes": ["monitor:read"]}),
    "delete": ("DELETE", None),
}


def assert_problem(response, status: int, code: str) -> None:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == PROBLEM_JSON
    assert response.json["status"] == status
    assert response.json["code"] == code


def shown(full_key: str) -> str:
    return identifier_of(full_key) + "..."


def act(client, caller: str, action: str, reference: str):
    method, body = ACTIONS[action]
    return client.open(f"/api/keys/{reference}", method=method, json=body, auth=(caller, ""))


def assert_untouched(client, owner: str, key: str, name: str) -> None:
    """`key` still exists for its own organization, unchanged, and still works."""
    response = client.get(f"/api/keys/{identifier_of(key)}", auth=(owner, ""))
    assert response.status_code == 200, response.json
    assert response.json["name"] == name


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("action", list(ACTIONS))
def test_key_of_another_organization_is_404_never_403(
    client, org, other_org, make_key, action, form
):
    theirs = make_key(scopes=["monitor:read"], name="theirs", org_name=other_org.name)
    response = act(client, org.sdk, action, FORMS[form](theirs))
    assert_problem(response, 404, "not_found")
    assert_untouched(client, other_org.sdk, theirs, "theirs")


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("action", list(ACTIONS))
def test_more_powerful_key_of_another_organization_is_404_not_403(
    client, org, other_org, make_key, action, form
):
    # Within its own organization this weak caller would get 403 on the sdk key.
    weak = make_key(scopes=["monitor:read"], name="weak")
    response = act(client, weak, action, FORMS[form](other_org.sdk))
    assert_problem(response, 404, "not_found")
    assert_untouched(client, other_org.sdk, other_org.sdk, "SDK Integration")


@pytest.mark.parametrize("form", list(FORMS))
def test_immutable_key_of_another_organization_is_404_not_409(client, org, other_org, form):
    response = act(client, org.sdk, "rescope", FORMS[form](other_org.telemetry))
    assert_problem(response, 404, "not_found")
    assert_untouched(client, other_org.sdk, other_org.telemetry, "Telemetry")


@pytest.mark.parametrize("form", list(FORMS))
def test_another_organizations_key_answers_like_an_unknown_key(client, org, other_org, form):
    theirs = client.get(f"/api/keys/{FORMS[form](other_org.sdk)}", auth=(org.sdk, ""))
    unknown = client.get(f"/api/keys/{FORMS[form]('ak_' + 'Z' * 50)}", auth=(org.sdk, ""))
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json == unknown.json


def test_failed_delete_leaves_the_other_organizations_key_working(client, org, other_org):
    response = client.delete(f"/api/keys/{other_org.sdk}", auth=(org.sdk, ""))
    assert_problem(response, 404, "not_found")
    assert client.get("/api/keys", auth=(other_org.sdk, "")).status_code == 200


def test_same_request_succeeds_within_the_owning_organization(client, org, other_org, make_key):
    theirs = make_key(scopes=["monitor:read"], name="theirs", org_name=other_org.name)
    assert act(client, other_org.sdk, "get", identifier_of(theirs)).status_code == 200
    assert act(client, other_org.sdk, "rename", identifier_of(theirs)).status_code == 200
    assert act(client, other_org.sdk, "delete", identifier_of(theirs)).status_code == 204


def test_list_never_shows_another_organizations_keys(client, org, other_org, make_key):
    ours = make_key(name="ours")
    theirs = make_key(name="theirs", org_name=other_org.name)
    mine = client.get("/api/keys?page_size=200", auth=(org.sdk, ""))
    assert mine.status_code == 200
    assert {item["key"] for item in mine.json["data"]} == {
        shown(org.sdk),
        shown(org.telemetry),
        shown(ours),
    }
    text = mine.get_data(as_text=True)
    for key in (other_org.sdk, other_org.telemetry, theirs):
        assert identifier_of(key) not in text
    their_list = client.get("/api/keys?page_size=200", auth=(other_org.sdk, ""))
    assert {item["key"] for item in their_list.json["data"]} == {
        shown(other_org.sdk),
        shown(other_org.telemetry),
        shown(theirs),
    }


@pytest.mark.parametrize("kind", ["telemetry", "sdk_integration", "custom"])
def test_list_filtered_by_kind_stays_within_the_organization(
    client, org, other_org, make_key, kind
):
    make_key(kind=kind, name="theirs", org_name=other_org.name)
    body = client.get(f"/api/keys?kind={kind}", auth=(org.sdk, "")).json
    expected = {"telemetry": 1, "sdk_integration": 1, "custom": 0}[kind]
    assert body["total_count"] == len(body["data"]) == expected
    assert "theirs" not in {item["name"] for item in body["data"]}


def test_total_count_is_per_organization(client, org, other_org, make_org, make_key):
    third = make_org("initech")
    for number in range(3):
        make_key(name=f"ours {number}")
    for number in range(5):
        make_key(name=f"theirs {number}", org_name=other_org.name)
    counts = [
        client.get("/api/keys", auth=(caller, "")).json["total_count"]
        for caller in (org.sdk, other_org.sdk, third.sdk)
    ]
    assert counts == [5, 7, 2]


def test_paging_stays_within_the_organization(client, org, other_org, make_key):
    for number in range(4):
        make_key(name=f"theirs {number}", org_name=other_org.name)
    body = client.get("/api/keys?page=2&page_size=2", auth=(org.sdk, "")).json
    assert body == {"page": 2, "page_size": 2, "total_count": 2, "data": []}


def test_created_key_belongs_to_the_callers_organization(client, org, other_org):
    body = {"name": "fresh", "kind": "custom", "scopes": ["site:read"]}
    created = client.post("/api/keys", json=body, auth=(org.sdk, ""))
    assert created.status_code == 201, created.json
    reference = identifier_of(created.json["key"])
    assert client.get(f"/api/keys/{reference}", auth=(org.sdk, "")).status_code == 200
    assert_problem(client.get(f"/api/keys/{reference}", auth=(other_org.sdk, "")), 404, "not_found")
    assert client.get("/api/keys", auth=(other_org.sdk, "")).json["total_count"] == 2
