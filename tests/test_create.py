"""POST /api/keys: spec section 4 "Create" and docs/design.md, "Requests and errors"."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from tests.key_fields import KEY_FIELDS

# The scope table of the specification, in its order.
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
KEY_CHARACTERS = re.compile(r"[A-Za-z0-9_]+")
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")
READ_ONLY = ("key", "immutable", "last_used", "created", "updated")


@pytest.fixture
def auth(org) -> tuple[str, str]:
    """The organization's SDK Integration key: it may create any key."""
    return (org.sdk, "")


def _create(client, auth, body):
    return client.post("/api/keys", json=body, auth=auth)


def _listing(client, auth) -> dict:
    response = client.get("/api/keys", query_string={"page_size": 200}, auth=auth)
    assert response.status_code == 200, response.json
    return response.json


def _snapshot(client, auth) -> tuple[int, list[str]]:
    """What a refusal must leave alone: the number of keys and which keys they are."""
    listing = _listing(client, auth)
    return listing["total_count"], [key["key"] for key in listing["data"]]


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


def _assert_refused(client, auth, body, field: str) -> dict:
    """A refused create: 422 validation_error naming `field`, and nothing written."""
    before = _snapshot(client, auth)
    response = _create(client, auth, body)
    problem = _assert_problem(response, 422, "validation_error")
    errors = problem["errors"]
    assert isinstance(errors, dict)
    assert field in errors, errors
    assert errors[field] and all(isinstance(message, str) for message in errors[field])
    assert _snapshot(client, auth) == before
    return problem


def _parse(timestamp: str) -> datetime:
    assert TIMESTAMP.fullmatch(timestamp), timestamp
    return datetime.fromisoformat(timestamp)


def _shown(client, auth, reference: str) -> dict:
    response = client.get(f"/api/keys/{reference}", auth=auth)
    assert response.status_code == 200, response.json
    return response.json


# --- success: status, Location, the full key ---------------------------------------------


def test_create_returns_201_with_location_that_gets_the_same_key(client, auth):
    response = _create(client, auth, {"name": "ci", "kind": "custom", "scopes": ["site:read"]})
    assert response.status_code == 201, response.json
    assert response.mimetype == "application/json"
    created = response.json
    location = response.headers["Location"]
    got = client.get(location, auth=auth)
    assert got.status_code == 200, got.json
    assert created["key"].startswith(got.json["key"].removesuffix("..."))
    assert got.json == created | {"key": got.json["key"]}
    assert got.json["key"].endswith("...")


def test_create_response_has_every_field_of_the_key_resource(client, auth):
    response = _create(client, auth, {"name": "ci", "kind": "custom", "scopes": ["site:read"]})
    assert response.status_code == 201, response.json
    assert tuple(response.json) == KEY_FIELDS
    assert response.json["name"] == "ci"
    assert response.json["kind"] == "custom"
    assert response.json["scopes"] == ["site:read"]


def test_full_key_is_identifier_plus_secret_in_url_safe_characters(client, auth):
    created = _create(client, auth, {"name": "ci", "kind": "custom", "scopes": ["site:read"]})
    assert created.status_code == 201, created.json
    full_key = created.json["key"]
    assert KEY_CHARACTERS.fullmatch(full_key), full_key
    assert full_key.startswith("ak_")
    shown = _shown(client, auth, full_key)["key"]
    assert shown.endswith("...")
    identifier = shown.removesuffix("...")
    assert len(identifier) >= 8
    assert identifier.startswith("ak_")
    assert KEY_CHARACTERS.fullmatch(identifier), identifier
    assert full_key.startswith(identifier)
    # At least 128 bits of randomness beyond the public identifier: 22 base62 characters.
    assert len(full_key) - len(identifier) >= 22


def test_each_created_key_has_its_own_identifier_and_value(client, auth):
    body = {"name": "same", "kind": "custom", "scopes": ["site:read"]}
    first, second = _create(client, auth, body), _create(client, auth, body)
    assert first.status_code == second.status_code == 201
    assert first.json["key"] != second.json["key"]
    shown = {_shown(client, auth, r.json["key"])["key"] for r in (first, second)}
    assert len(shown) == 2


def test_full_key_appears_only_in_the_create_response(client, auth):
    created = _create(client, auth, {"name": "ci", "kind": "custom", "scopes": ["site:read"]})
    assert created.status_code == 201, created.json
    full_key = created.json["key"]
    got = client.get(created.headers["Location"], auth=auth)
    listing = client.get("/api/keys", auth=auth)
    assert got.status_code == listing.status_code == 200
    identifier = got.json["key"].removesuffix("...")
    assert got.json["key"] == f"{identifier}..."
    assert full_key not in got.get_data(as_text=True)
    assert full_key not in listing.get_data(as_text=True)
    listed = [key["key"] for key in listing.json["data"]]
    assert f"{identifier}..." in listed
    assert all(key.endswith("...") for key in listed)


# --- what each kind yields -------------------------------------------------------------------


def test_create_telemetry_without_scopes_yields_fixed_immutable_key(client, auth):
    response = _create(client, auth, {"name": "browser", "kind": "telemetry"})
    assert response.status_code == 201, response.json
    assert response.json["kind"] == "telemetry"
    assert response.json["scopes"] == ["monitor:telemetry"]
    assert response.json["immutable"] is True
    assert response.json["last_used"] is None
    assert response.json["created"] == response.json["updated"]


def test_create_sdk_integration_yields_all_eleven_scopes_in_table_order_immutable(client, auth):
    response = _create(client, auth, {"name": "sdk", "kind": "sdk_integration"})
    assert response.status_code == 201, response.json
    assert response.json["kind"] == "sdk_integration"
    assert response.json["scopes"] == SCOPE_TABLE
    assert response.json["immutable"] is True
    assert response.json["last_used"] is None
    assert response.json["created"] == response.json["updated"]


def test_create_custom_is_mutable_never_used_and_created_equals_updated(client, auth):
    body = {"name": "ci", "kind": "custom", "scopes": ["monitor:read", "issue:write"]}
    response = _create(client, auth, body)
    assert response.status_code == 201, response.json
    assert response.json["immutable"] is False
    assert response.json["last_used"] is None
    assert response.json["created"] == response.json["updated"]
    assert response.json["scopes"] == ["monitor:read", "issue:write"]
    stored = _shown(client, auth, response.json["key"])
    assert stored["immutable"] is False
    assert stored["last_used"] is None
    assert stored["created"] == stored["updated"] == response.json["created"]


@pytest.mark.parametrize(
    "body",
    [
        {"name": "t", "kind": "telemetry"},
        {"name": "s", "kind": "sdk_integration"},
        {"name": "c", "kind": "custom", "scopes": ["site:read"]},
    ],
    ids=["telemetry", "sdk_integration", "custom"],
)
def test_create_timestamps_are_iso8601_utc_ending_in_z(client, auth, body):
    before = datetime.now(UTC)
    response = _create(client, auth, body)
    after = datetime.now(UTC)
    assert response.status_code == 201, response.json
    for field in ("created", "updated"):
        moment = _parse(response.json[field])
        assert moment.utcoffset() == timedelta(0)
        assert before - timedelta(seconds=1) <= moment <= after + timedelta(seconds=1)


# --- scopes: folding, order, fixed sets ------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        (["site:read", "site:read"], ["site:read"]),
        (
            ["integration:write", "monitor:read", "site:write", "monitor:read"],
            ["monitor:read", "site:write", "integration:write"],
        ),
        (["issue:read", "monitor:telemetry", "issue:read"], ["monitor:telemetry", "issue:read"]),
        (list(reversed(SCOPE_TABLE)), SCOPE_TABLE),
        (SCOPE_TABLE + list(reversed(SCOPE_TABLE)), SCOPE_TABLE),
    ],
    ids=["duplicate", "shuffled-with-duplicate", "telemetry-scope", "reversed", "all-twice"],
)
def test_create_folds_duplicate_scopes_and_lists_them_in_scope_table_order(
    client, auth, given, shown
):
    response = _create(client, auth, {"name": "ci", "kind": "custom", "scopes": given})
    assert response.status_code == 201, response.json
    assert response.json["scopes"] == shown
    assert _shown(client, auth, response.json["key"])["scopes"] == shown


@pytest.mark.parametrize(
    ("kind", "scopes", "fixed"),
    [
        ("telemetry", None, ["monitor:telemetry"]),
        ("telemetry", ["monitor:telemetry"], ["monitor:telemetry"]),
        ("telemetry", ["monitor:telemetry", "monitor:telemetry"], ["monitor:telemetry"]),
        ("sdk_integration", None, SCOPE_TABLE),
        ("sdk_integration", SCOPE_TABLE, SCOPE_TABLE),
        ("sdk_integration", list(reversed(SCOPE_TABLE)), SCOPE_TABLE),
        ("sdk_integration", [*SCOPE_TABLE, "site:read", "monitor:read"], SCOPE_TABLE),
    ],
    ids=[
        "telemetry-omitted",
        "telemetry-exact",
        "telemetry-duplicate",
        "sdk-omitted",
        "sdk-exact",
        "sdk-reversed",
        "sdk-duplicates",
    ],
)
def test_create_fixed_kind_accepts_scopes_omitted_or_equal_to_its_fixed_set(
    client, auth, kind, scopes, fixed
):
    body = {"name": "fixed", "kind": kind}
    if scopes is not None:
        body["scopes"] = scopes
    response = _create(client, auth, body)
    assert response.status_code == 201, response.json
    assert response.json["kind"] == kind
    assert response.json["scopes"] == fixed
    assert response.json["immutable"] is True


@pytest.mark.parametrize(
    ("kind", "scopes"),
    [
        ("telemetry", []),
        ("telemetry", ["monitor:read"]),
        ("telemetry", ["monitor:telemetry", "monitor:read"]),
        ("telemetry", SCOPE_TABLE),
        ("sdk_integration", []),
        ("sdk_integration", ["monitor:read"]),
        ("sdk_integration", ["monitor:telemetry"]),
        ("sdk_integration", [s for s in SCOPE_TABLE if s != "monitor:telemetry"]),
        ("sdk_integration", SCOPE_TABLE[:-1]),
    ],
    ids=[
        "telemetry-empty",
        "telemetry-other",
        "telemetry-more",
        "telemetry-all",
        "sdk-empty",
        "sdk-one",
        "sdk-telemetry-only",
        "sdk-without-telemetry",
        "sdk-without-last",
    ],
)
def test_create_fixed_kind_refuses_scopes_other_than_its_fixed_set(client, auth, kind, scopes):
    _assert_refused(client, auth, {"name": "fixed", "kind": kind, "scopes": scopes}, "scopes")


@pytest.mark.parametrize("body", [{}, {"scopes": []}], ids=["omitted", "empty"])
def test_create_custom_needs_non_empty_scopes(client, auth, body):
    _assert_refused(client, auth, {"name": "ci", "kind": "custom"} | body, "scopes")


@pytest.mark.parametrize(
    ("kind", "scopes"),
    [
        ("custom", ["monitor:admin"]),
        ("custom", ["site:read", "nonsense"]),
        ("custom", ["MONITOR:READ"]),
        ("custom", ["monitor:read "]),
        ("custom", ["monitor"]),
        ("custom", [""]),
        ("telemetry", ["telemetry"]),
        ("sdk_integration", ["*"]),
    ],
)
def test_create_refuses_unknown_scope(client, auth, kind, scopes):
    _assert_refused(client, auth, {"name": "ci", "kind": kind, "scopes": scopes}, "scopes")


# --- name -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("  ci  ", "ci"),
        (" Production deploys ", "Production deploys"),
        ("   x", "x"),
        ("x   ", "x"),
    ],
)
def test_create_trims_name_and_stores_it_trimmed(client, auth, given, stored):
    body = {"name": given, "kind": "custom", "scopes": ["site:read"]}
    response = _create(client, auth, body)
    assert response.status_code == 201, response.json
    assert response.json["name"] == stored
    assert _shown(client, auth, response.json["key"])["name"] == stored
    listed = _listing(client, auth)["data"]
    assert stored in [key["name"] for key in listed]
    assert given not in [key["name"] for key in listed]


@pytest.mark.parametrize(
    "name",
    [
        "a",
        "a" * 200,
        "  " + "a" * 200 + "  ",
        "é" * 200,
        "名" * 200,
        "Staging \u2013 metrics (EU)",
    ],
    ids=["one", "two-hundred", "two-hundred-padded", "accented", "cjk", "punctuation"],
)
def test_create_accepts_name_of_1_to_200_characters_after_trimming(client, auth, name):
    response = _create(client, auth, {"name": name, "kind": "custom", "scopes": ["site:read"]})
    assert response.status_code == 201, response.json
    assert response.json["name"] == name.strip()
    assert _shown(client, auth, response.json["key"])["name"] == name.strip()


@pytest.mark.parametrize(
    "name",
    ["", " ", "   \t  ", "a" * 201, " " + "a" * 201 + " ", "é" * 201],
    ids=["empty", "space", "whitespace-only", "201", "201-padded", "201-accented"],
)
def test_create_refuses_name_empty_after_trimming_or_longer_than_200(client, auth, name):
    body = {"name": name, "kind": "custom", "scopes": ["site:read"]}
    _assert_refused(client, auth, body, "name")


@pytest.mark.parametrize(
    "name",
    ["a\x00b", "a\nb", "a\tb", "a\rb", "a\x1bb", "a\x1fb", "a\x7fb", "a\x85b", "a\x9fb"],
    ids=["nul", "newline", "tab", "cr", "escape", "unit-sep", "del", "c1-nel", "c1-last"],
)
def test_create_refuses_control_characters_in_name(client, auth, name):
    body = {"name": name, "kind": "custom", "scopes": ["site:read"]}
    _assert_refused(client, auth, body, "name")


# Bidirectional controls make a name display as something else ("txt.exe" shown as
# "exe.txt"); emoji sequences (joined by U+200D, with variation selectors) stay names.
@pytest.mark.parametrize(
    "control", [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]
)
def test_create_refuses_bidirectional_controls_in_name(client, auth, control):
    body = {"name": f"invoice{control}fdp.exe", "kind": "custom", "scopes": ["site:read"]}
    problem = _assert_refused(client, auth, body, "name")
    assert "bidirectional" in " ".join(problem["errors"]["name"])


@pytest.mark.parametrize(
    "name",
    [
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",
        "\u2764\ufe0f team",
        "\U0001f3f3\ufe0f\u200d\U0001f308",
    ],
    ids=["family", "heart", "rainbow-flag"],
)
def test_create_allows_emoji_sequences_in_name(client, auth, name):
    body = {"name": name, "kind": "custom", "scopes": ["site:read"]}
    response = _create(client, auth, body)
    assert response.status_code == 201, response.json
    assert response.json["name"] == name


def test_create_allows_two_keys_with_the_same_name(client, auth):
    body = {"name": "twin", "kind": "custom", "scopes": ["site:read"]}
    assert _create(client, auth, body).status_code == 201
    assert _create(client, auth, body).status_code == 201
    names = [key["name"] for key in _listing(client, auth)["data"]]
    assert names.count("twin") == 2


# --- required fields, kind, types, null ------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "custom", "scopes": ["site:read"]}, "name"),
        ({"kind": "telemetry"}, "name"),
        ({"name": "ci", "scopes": ["site:read"]}, "kind"),
        ({"name": "ci"}, "kind"),
        ({}, "name"),
        ({}, "kind"),
    ],
    ids=[
        "no-name-custom",
        "no-name-telemetry",
        "no-kind",
        "no-kind-no-scopes",
        "empty-name",
        "empty-kind",
    ],
)
def test_create_requires_name_and_kind(client, auth, body, field):
    _assert_refused(client, auth, body, field)


@pytest.mark.parametrize(
    "kind", ["", "Custom", "TELEMETRY", "admin", "sdk", "sdk-integration", "custom "]
)
def test_create_refuses_kind_other_than_the_three(client, auth, kind):
    _assert_refused(client, auth, {"name": "ci", "kind": kind, "scopes": ["site:read"]}, "kind")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", 42),
        ("name", 4.2),
        ("name", True),
        ("name", ["ci"]),
        ("name", {"text": "ci"}),
        ("kind", 1),
        ("kind", ["custom"]),
        ("kind", True),
        ("scopes", "site:read"),
        ("scopes", {"site:read": True}),
        ("scopes", 1),
        ("scopes", True),
        ("scopes", [1]),
        ("scopes", ["site:read", 2]),
        ("scopes", [None]),
        ("scopes", [["site:read"]]),
        ("scopes", [{"scope": "site:read"}]),
        ("scopes", [True]),
    ],
)
def test_create_refuses_wrong_types(client, auth, field, value):
    body = {"name": "ci", "kind": "custom", "scopes": ["site:read"], field: value}
    _assert_refused(client, auth, body, field)


@pytest.mark.parametrize(
    ("kind", "field"),
    [
        ("custom", "name"),
        ("custom", "kind"),
        ("custom", "scopes"),
        ("telemetry", "name"),
        ("telemetry", "scopes"),
        ("sdk_integration", "scopes"),
    ],
)
def test_create_refuses_null_for_any_field(client, auth, kind, field):
    body = {"name": "ci", "kind": kind}
    if kind == "custom":
        body["scopes"] = ["site:read"]
    body[field] = None
    _assert_refused(client, auth, body, field)


# --- read-only and unknown fields ------------------------------------------------------------


@pytest.mark.parametrize(
    "read_only",
    [
        {"key": "ak_mine", "immutable": True, "last_used": "2001-01-01T00:00:00Z"},
        {"created": "1999-12-31T23:59:59Z", "updated": "2999-01-01T00:00:00Z"},
        {"key": None, "immutable": None, "last_used": None, "created": None, "updated": None},
        {"key": 12, "immutable": "yes", "last_used": [], "created": {}, "updated": False},
        {"key": "x" * 500, "immutable": 0, "last_used": "not a time", "created": 1},
    ],
    ids=["plausible", "other-times", "nulls", "wrong-types", "odd"],
)
def test_create_ignores_read_only_fields_even_with_odd_values(client, auth, read_only):
    before = datetime.now(UTC)
    body = {"name": "ci", "kind": "custom", "scopes": ["site:read"]} | read_only
    response = _create(client, auth, body)
    assert response.status_code == 201, response.json
    created = response.json
    assert KEY_CHARACTERS.fullmatch(created["key"]) and created["key"].startswith("ak_")
    assert created["key"] != read_only.get("key")
    assert created["immutable"] is False
    assert created["last_used"] is None
    assert created["created"] == created["updated"]
    assert _parse(created["created"]) >= before - timedelta(seconds=1)
    stored = _shown(client, auth, created["key"])
    assert stored == created | {"key": stored["key"]}


def test_create_telemetry_ignores_immutable_false(client, auth):
    body = {"name": "t", "kind": "telemetry", "immutable": False}
    response = _create(client, auth, body)
    assert response.status_code == 201, response.json
    assert response.json["immutable"] is True


@pytest.mark.parametrize(
    "field", ["foo", "Name", "scope", "organization", "id", "secret", "expires"]
)
def test_create_refuses_unknown_field_naming_it(client, auth, field):
    body = {"name": "ci", "kind": "custom", "scopes": ["site:read"], field: "x"}
    problem = _assert_refused(client, auth, body, field)
    assert set(problem["errors"]) == {field}


def test_create_refusal_is_problem_json_with_field_errors(client, auth):
    body = {"name": "", "kind": "admin", "scopes": ["site:read"], "colour": "red"}
    problem = _assert_refused(client, auth, body, "name")
    assert set(problem) <= {"type", "title", "status", "detail", "code", "errors"}
    assert problem["status"] == 422
    assert {"name", "kind", "colour"} <= set(problem["errors"])
    for messages in problem["errors"].values():
        assert isinstance(messages, list) and messages
        assert all(isinstance(message, str) and message for message in messages)


@pytest.mark.parametrize("kind", ["telemetry", "sdk_integration"])
def test_a_fixed_kinds_refusal_reads_as_english(client, auth, kind):
    problem = _assert_refused(client, auth, {"name": "n", "kind": kind, "scopes": []}, "scopes")
    [message] = problem["errors"]["scopes"]
    assert message.startswith(f"The scopes of {kind} keys are fixed"), message
