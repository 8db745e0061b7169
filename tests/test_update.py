"""PUT /api/keys/<key>: spec section 4 "Update" and docs/design.md, "Requests and errors"."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from app.keys.schemas import UPDATABLE

SCOPE_TABLE = [
    "monitor:read",
    "monitor:write",
    "monitor:telemetry",
    "site:read",
    "site:write",
    "statuspage:read",
    "statuspage:write",
    "issue:read",
    "issue:write",
    "integration:read",
    "integration:write",
]
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")


@pytest.fixture
def auth(org) -> tuple[str, str]:
    """The organization's SDK Integration key: it holds every scope."""
    return (org.sdk, "")


@pytest.fixture
def target(client, auth) -> dict:
    """A custom key made through the API; its create response (with the full key)."""
    body = {"name": "ci", "kind": "custom", "scopes": ["monitor:read", "site:read"]}
    response = client.post("/api/keys", json=body, auth=auth)
    assert response.status_code == 201, response.json
    return response.json


@pytest.fixture
def immutable_target(client, auth, request) -> dict:
    """A telemetry or sdk_integration key made through the API (parametrized by kind)."""
    response = client.post("/api/keys", json={"name": "fixed", "kind": request.param}, auth=auth)
    assert response.status_code == 201, response.json
    return response.json


IMMUTABLE_KINDS = pytest.mark.parametrize(
    "immutable_target", ["telemetry", "sdk_integration"], indirect=True
)


def _get(client, auth, reference: str) -> dict:
    response = client.get(f"/api/keys/{reference}", auth=auth)
    assert response.status_code == 200, response.json
    return response.json


def _put(client, auth, reference: str, body):
    return client.put(f"/api/keys/{reference}", json=body, auth=auth)


def _time(timestamp: str) -> datetime:
    assert TIMESTAMP.fullmatch(timestamp), timestamp
    return datetime.fromisoformat(timestamp)


def _assert_problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    body = response.json
    assert isinstance(body["type"], str) and body["type"]
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    assert body["status"] == status
    assert body["code"] == code
    return body


def _assert_refused(client, auth, key: dict, body, status: int, code: str) -> dict:
    """A refused update: the given status and code, and the key exactly as before."""
    reference = key["key"]
    before = _get(client, auth, reference)
    problem = _assert_problem(_put(client, auth, reference, body), status, code)
    assert _get(client, auth, reference) == before
    return problem


def _assert_invalid(client, auth, key: dict, body, *fields: str) -> dict:
    problem = _assert_refused(client, auth, key, body, 422, "validation_error")
    errors = problem["errors"]
    for field in fields:
        assert field in errors, errors
        assert errors[field] and all(isinstance(message, str) for message in errors[field])
    return problem


# --- what an update changes -----------------------------------------------------------------


def test_update_name_only_changes_the_name_and_keeps_the_scopes(client, auth, target):
    response = _put(client, auth, target["key"], {"name": "nightly"})
    assert response.status_code == 200, response.json
    assert response.json["name"] == "nightly"
    assert response.json["scopes"] == ["monitor:read", "site:read"]
    stored = _get(client, auth, target["key"])
    assert stored["name"] == "nightly"
    assert stored["scopes"] == ["monitor:read", "site:read"]


def test_update_scopes_only_changes_the_scopes_and_keeps_the_name(client, auth, target):
    response = _put(client, auth, target["key"], {"scopes": ["issue:write", "issue:read"]})
    assert response.status_code == 200, response.json
    assert response.json["name"] == "ci"
    assert response.json["scopes"] == ["issue:read", "issue:write"]
    stored = _get(client, auth, target["key"])
    assert stored["name"] == "ci"
    assert stored["scopes"] == ["issue:read", "issue:write"]


def test_update_name_and_scopes_together(client, auth, target):
    body = {"name": "deploys", "scopes": ["statuspage:write"]}
    response = _put(client, auth, target["key"], body)
    assert response.status_code == 200, response.json
    assert response.json["name"] == "deploys"
    assert response.json["scopes"] == ["statuspage:write"]
    stored = _get(client, auth, target["key"])
    assert (stored["name"], stored["scopes"]) == ("deploys", ["statuspage:write"])


def test_update_response_is_the_updated_key_object(client, auth, target):
    response = _put(client, auth, target["key"], {"name": "renamed"})
    assert response.status_code == 200, response.json
    assert response.mimetype == "application/json"
    stored = _get(client, auth, target["key"])
    assert response.json == stored
    assert response.json["key"].endswith("...")
    assert target["key"].startswith(response.json["key"].removesuffix("..."))
    assert target["key"] not in response.get_data(as_text=True)
    assert response.json["kind"] == "custom"
    assert response.json["immutable"] is False
    assert response.json["last_used"] is None
    assert response.json["created"] == target["created"]


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        (["site:write", "monitor:write", "site:write"], ["monitor:write", "site:write"]),
        (list(reversed(SCOPE_TABLE)), SCOPE_TABLE),
    ],
    ids=["duplicate", "reversed"],
)
def test_update_folds_duplicate_scopes_and_lists_them_in_table_order(
    client, auth, target, given, shown
):
    response = _put(client, auth, target["key"], {"scopes": given})
    assert response.status_code == 200, response.json
    assert response.json["scopes"] == shown
    assert _get(client, auth, target["key"])["scopes"] == shown


def test_update_trims_name_and_stores_it_trimmed(client, auth, target):
    response = _put(client, auth, target["key"], {"name": "   padded name  "})
    assert response.status_code == 200, response.json
    assert response.json["name"] == "padded name"
    assert _get(client, auth, target["key"])["name"] == "padded name"


@pytest.mark.parametrize("name", ["a", "a" * 200, " " + "b" * 200 + " "])
def test_update_accepts_name_of_1_to_200_characters_after_trimming(client, auth, target, name):
    response = _put(client, auth, target["key"], {"name": name})
    assert response.status_code == 200, response.json
    assert _get(client, auth, target["key"])["name"] == name.strip()


# --- timestamps -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [{"name": "other"}, {"scopes": ["issue:read"]}, {"name": "other", "scopes": ["issue:read"]}],
    ids=["name", "scopes", "both"],
)
def test_update_that_changes_something_makes_updated_later_than_created(client, auth, target, body):
    response = _put(client, auth, target["key"], body)
    assert response.status_code == 200, response.json
    assert response.json["created"] == target["created"]
    assert _time(response.json["updated"]) > _time(response.json["created"])
    stored = _get(client, auth, target["key"])
    assert stored["updated"] == response.json["updated"]
    assert stored["created"] == target["created"]


def test_each_changing_update_moves_updated_forward(client, auth, target):
    first = _put(client, auth, target["key"], {"name": "one"})
    second = _put(client, auth, target["key"], {"name": "two"})
    assert first.status_code == second.status_code == 200
    assert _time(second.json["updated"]) > _time(first.json["updated"])


def test_key_never_updated_has_updated_equal_to_created(client, auth, target):
    assert target["updated"] == target["created"]
    stored = _get(client, auth, target["key"])
    assert stored["updated"] == stored["created"] == target["created"]


@pytest.mark.parametrize(
    "body",
    [
        {"name": "ci"},
        {"scopes": ["monitor:read", "site:read"]},
        {"scopes": ["site:read", "monitor:read", "site:read"]},
        {"name": " ci ", "scopes": ["site:read", "monitor:read"]},
        {"name": "ci", "kind": "custom"},
    ],
    ids=["same-name", "same-scopes", "same-scopes-shuffled", "same-both-padded", "same-kind"],
)
def test_update_that_changes_nothing_succeeds_and_leaves_the_key_as_it_was(
    client, auth, target, body
):
    before = _get(client, auth, target["key"])
    response = _put(client, auth, target["key"], body)
    assert response.status_code == 200, response.json
    assert response.json == before
    assert response.json["updated"] == response.json["created"]
    assert _get(client, auth, target["key"]) == before


# --- read-only fields and bodies with nothing to update --------------------------------------


def test_update_ignores_read_only_fields_so_a_client_can_send_back_what_it_read(
    client, auth, target
):
    read = _get(client, auth, target["key"])
    response = _put(client, auth, target["key"], read | {"name": "echoed"})
    assert response.status_code == 200, response.json
    assert response.json == read | {"name": "echoed", "updated": response.json["updated"]}


def test_update_ignores_read_only_fields_with_odd_values(client, auth, target):
    body = {
        "name": "odd",
        "key": "ak_someone_else",
        "immutable": True,
        "last_used": "2001-01-01T00:00:00Z",
        "created": None,
        "updated": 7,
    }
    response = _put(client, auth, target["key"], body)
    assert response.status_code == 200, response.json
    stored = _get(client, auth, target["key"])
    assert stored == response.json
    assert stored["name"] == "odd"
    assert stored["immutable"] is False
    assert stored["last_used"] is None
    assert stored["created"] == target["created"]
    assert _time(stored["updated"]) > _time(stored["created"])
    assert target["key"].startswith(stored["key"].removesuffix("..."))


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"kind": "custom"},
        {"key": "ak_x...", "immutable": False},
        {"last_used": None, "created": "2020-01-01T00:00:00Z", "updated": "2020-01-01T00:00:00Z"},
        {"key": "k", "kind": "custom", "immutable": False, "last_used": None, "created": "x"},
    ],
    ids=["empty", "kind-only", "read-only", "read-only-times", "everything-but"],
)
def test_update_with_neither_name_nor_scopes_is_refused(client, auth, target, body):
    problem = _assert_invalid(client, auth, target, body, "_schema")
    # Said once, of the body as a whole, not once for each field it could name.
    fields = ", ".join(sorted(UPDATABLE))
    assert problem["errors"] == {"_schema": [f"An update needs one of: {fields}."]}
    assert problem["detail"].count("An update needs") <= 1


def test_update_echoing_a_read_key_without_its_updatable_fields_is_refused(client, auth, target):
    read = _get(client, auth, target["key"])
    body = {field: value for field, value in read.items() if field not in UPDATABLE}
    _assert_invalid(client, auth, target, body)


# --- refused input --------------------------------------------------------------------------


def test_update_refuses_empty_scopes_on_a_custom_key(client, auth, target):
    _assert_invalid(client, auth, target, {"scopes": []}, "scopes")
    _assert_invalid(client, auth, target, {"name": "new", "scopes": []}, "scopes")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "a" * 201}, "name"),
        ({"name": "bad\x00name"}, "name"),
        ({"name": "bad\nname"}, "name"),
        ({"name": "bad\x7fname"}, "name"),
        ({"name": 5}, "name"),
        ({"name": ["ci"]}, "name"),
        ({"name": None}, "name"),
        ({"scopes": None}, "scopes"),
        ({"scopes": "site:read"}, "scopes"),
        ({"scopes": [1]}, "scopes"),
        ({"scopes": [None]}, "scopes"),
        ({"scopes": ["site:admin"]}, "scopes"),
        ({"name": "ok", "scopes": ["site:read", "nonsense"]}, "scopes"),
        ({"name": "", "scopes": ["issue:read"]}, "name"),
        ({"name": "ok", "colour": "red"}, "colour"),
        ({"name": "ok", "organization": "globex"}, "organization"),
        ({"name": "ok", "kind": None}, "kind"),
    ],
    ids=[
        "name-empty",
        "name-whitespace",
        "name-201",
        "name-nul",
        "name-newline",
        "name-del",
        "name-number",
        "name-list",
        "name-null",
        "scopes-null",
        "scopes-string",
        "scopes-number-item",
        "scopes-null-item",
        "scopes-unknown",
        "scopes-one-unknown",
        "name-empty-with-scopes",
        "unknown-field",
        "unknown-field-organization",
        "kind-null",
    ],
)
def test_update_refuses_invalid_input_and_writes_nothing(client, auth, target, body, field):
    _assert_invalid(client, auth, target, body, field)


# --- immutable keys -------------------------------------------------------------------------


@IMMUTABLE_KINDS
@pytest.mark.parametrize(
    "scopes",
    [["monitor:read"], ["monitor:telemetry", "monitor:read"], SCOPE_TABLE[:-1], []],
    ids=["other", "telemetry-plus", "all-but-one", "empty"],
)
def test_update_of_immutable_key_scopes_is_conflict(client, auth, immutable_target, scopes):
    problem = _assert_refused(
        client, auth, immutable_target, {"scopes": scopes}, 409, "immutable_key"
    )
    assert problem["status"] == 409
    assert (
        problem["detail"].startswith("The scopes of ")
        and " keys cannot change." in problem["detail"]
    ), problem["detail"]


@IMMUTABLE_KINDS
def test_update_of_immutable_key_scopes_with_a_new_name_writes_nothing(
    client, auth, immutable_target
):
    body = {"name": "renamed", "scopes": ["site:read"]}
    _assert_refused(client, auth, immutable_target, body, 409, "immutable_key")


@IMMUTABLE_KINDS
@pytest.mark.parametrize("arrangement", ["as-shown", "reversed", "doubled"])
def test_update_of_immutable_key_with_its_current_scopes_succeeds(
    client, auth, immutable_target, arrangement
):
    scopes = immutable_target["scopes"]
    given = {
        "as-shown": scopes,
        "reversed": list(reversed(scopes)),
        "doubled": scopes + list(reversed(scopes)),
    }[arrangement]
    before = _get(client, auth, immutable_target["key"])
    response = _put(client, auth, immutable_target["key"], {"scopes": given})
    assert response.status_code == 200, response.json
    assert response.json == before


@IMMUTABLE_KINDS
def test_update_of_immutable_key_name_succeeds(client, auth, immutable_target):
    body = {"name": "renamed", "scopes": immutable_target["scopes"]}
    response = _put(client, auth, immutable_target["key"], body)
    assert response.status_code == 200, response.json
    assert response.json["name"] == "renamed"
    assert response.json["scopes"] == immutable_target["scopes"]
    assert response.json["immutable"] is True
    assert _time(response.json["updated"]) > _time(response.json["created"])
    response = _put(client, auth, immutable_target["key"], {"name": "only the name"})
    assert response.status_code == 200, response.json
    assert _get(client, auth, immutable_target["key"])["name"] == "only the name"


def test_update_of_the_starting_telemetry_key_scopes_is_conflict(client, auth, org):
    key = {"key": org.telemetry}
    _assert_refused(client, auth, key, {"scopes": ["monitor:read"]}, 409, "immutable_key")


# --- kind -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["custom", "telemetry", "sdk_integration"])
def test_update_accepts_kind_sent_unchanged(client, auth, kind):
    body = {"name": "k", "kind": kind}
    if kind == "custom":
        body["scopes"] = ["site:read"]
    created = client.post("/api/keys", json=body, auth=auth)
    assert created.status_code == 201, created.json
    response = _put(client, auth, created.json["key"], {"name": "renamed", "kind": kind})
    assert response.status_code == 200, response.json
    assert response.json["kind"] == kind
    assert response.json["name"] == "renamed"


@pytest.mark.parametrize(
    ("kind", "new_kind"),
    [
        ("custom", "telemetry"),
        ("custom", "sdk_integration"),
        ("telemetry", "custom"),
        ("telemetry", "sdk_integration"),
        ("sdk_integration", "custom"),
        ("sdk_integration", "telemetry"),
        ("custom", "admin"),
        ("custom", "Custom"),
        ("custom", 3),
    ],
)
def test_update_refuses_a_changed_kind(client, auth, kind, new_kind):
    body = {"name": "k", "kind": kind}
    if kind == "custom":
        body["scopes"] = ["site:read"]
    created = client.post("/api/keys", json=body, auth=auth)
    assert created.status_code == 201, created.json
    update = {"name": "renamed", "kind": new_kind}
    _assert_invalid(client, auth, created.json, update, "kind")


# --- references -----------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["identifier", "shown", "full"])
def test_update_accepts_every_form_of_the_key_reference(client, auth, target, form):
    shown = _get(client, auth, target["key"])["key"]
    reference = {
        "identifier": shown.removesuffix("..."),
        "shown": shown,
        "full": target["key"],
    }[form]
    response = _put(client, auth, reference, {"name": f"via {form}"})
    assert response.status_code == 200, response.json
    assert response.json["key"] == shown
    assert _get(client, auth, shown.removesuffix("..."))["name"] == f"via {form}"
    listing = client.get("/api/keys", auth=auth).json
    assert [key["name"] for key in listing["data"] if key["key"] == shown] == [f"via {form}"]
    assert listing["total_count"] == 3
