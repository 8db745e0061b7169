"""Permissions and the order of refusals (docs/design.md, "Permissions", "Requests and errors")."""

from __future__ import annotations

import pytest

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
UNKNOWN_IDENTIFIER = "ak_000000000000"
OVERSIZED_NAME = "a" * (70 * 1024)


@pytest.fixture
def sdk(org) -> tuple[str, str]:
    """The organization's SDK Integration key: it holds every scope."""
    return (org.sdk, "")


@pytest.fixture
def custom(make_key):
    """Credentials of a new custom key of the organization holding `scopes`."""

    def make(*scopes: str) -> tuple[str, str]:
        return (make_key(kind="custom", scopes=scopes, name="caller"), "")

    return make


@pytest.fixture
def key_with(make_key):
    """A new key of the organization to act on: its full value."""

    def make(kind: str = "custom", *scopes: str) -> str:
        return make_key(kind=kind, scopes=scopes, name="target")

    return make


def _create(client, auth, body):
    return client.post("/api/keys", json=body, auth=auth)


def _read(client, reference: str, org) -> dict:
    """A key as the organization's SDK key reads it (the refused caller may not)."""
    response = client.get(f"/api/keys/{reference}", auth=(org.sdk, ""))
    assert response.status_code == 200, response.json
    return response.json


def _count(client, org) -> int:
    response = client.get("/api/keys", auth=(org.sdk, ""))
    assert response.status_code == 200, response.json
    return response.json["total_count"]


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


def _assert_names_excess(problem: dict, excess, held) -> None:
    """The 403 names each exceeding scope (in detail and errors.scopes), and no held one."""
    messages = problem["errors"]["scopes"]
    assert messages and all(isinstance(message, str) for message in messages)
    joined = " ".join(messages)
    for scope in excess:
        assert scope in problem["detail"], problem["detail"]
        assert scope in joined, joined
    for scope in held:
        assert scope not in problem["detail"], problem["detail"]
        assert scope not in joined, joined


# --- create ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("held", "asked", "excess"),
    [
        (["monitor:read"], ["monitor:write"], ["monitor:write"]),
        (["monitor:read"], ["monitor:read", "site:write"], ["site:write"]),
        (
            ["site:read", "issue:read"],
            ["integration:write", "site:read", "monitor:telemetry", "issue:read"],
            ["monitor:telemetry", "integration:write"],
        ),
        (SCOPE_TABLE[:-1], SCOPE_TABLE, ["integration:write"]),
        (["statuspage:write"], ["statuspage:read"], ["statuspage:read"]),
    ],
    ids=["other", "one-more", "two-more", "all-but-one", "write-is-not-read"],
)
def test_create_with_scopes_beyond_caller_is_refused_naming_the_excess(
    client, org, custom, held, asked, excess
):
    caller = custom(*held)
    before = _count(client, org)
    response = _create(client, caller, {"name": "too much", "kind": "custom", "scopes": asked})
    problem = _assert_problem(response, 403, "scope_exceeds_caller")
    _assert_names_excess(problem, excess, held)
    assert _count(client, org) == before


@pytest.mark.parametrize(
    ("held", "asked"),
    [
        (["monitor:read"], ["monitor:read"]),
        (["monitor:read", "site:read", "issue:write"], ["issue:write", "site:read"]),
        (SCOPE_TABLE, SCOPE_TABLE),
    ],
    ids=["equal", "subset", "all"],
)
def test_create_within_caller_scopes_succeeds(client, custom, held, asked):
    body = {"name": "fits", "kind": "custom", "scopes": asked}
    response = _create(client, custom(*held), body)
    assert response.status_code == 201, response.json
    assert response.json["scopes"] == [scope for scope in SCOPE_TABLE if scope in asked]


@pytest.mark.parametrize(
    "held", [["monitor:telemetry"], ["monitor:read", "monitor:telemetry"]], ids=["only", "and"]
)
def test_custom_caller_holding_monitor_telemetry_may_create_telemetry_key(client, custom, held):
    response = _create(client, custom(*held), {"name": "browser", "kind": "telemetry"})
    assert response.status_code == 201, response.json
    assert response.json["scopes"] == ["monitor:telemetry"]


@pytest.mark.parametrize(
    "held",
    [["monitor:read"], [scope for scope in SCOPE_TABLE if scope != "monitor:telemetry"]],
    ids=["one-other", "all-others"],
)
def test_custom_caller_without_monitor_telemetry_may_not_create_telemetry_key(
    client, org, custom, held
):
    caller = custom(*held)
    before = _count(client, org)
    response = _create(client, caller, {"name": "browser", "kind": "telemetry"})
    problem = _assert_problem(response, 403, "scope_exceeds_caller")
    _assert_names_excess(problem, ["monitor:telemetry"], held)
    assert _count(client, org) == before


def test_custom_caller_holding_all_scopes_may_create_sdk_integration_key(client, custom):
    response = _create(client, custom(*SCOPE_TABLE), {"name": "sdk", "kind": "sdk_integration"})
    assert response.status_code == 201, response.json
    assert response.json["scopes"] == SCOPE_TABLE


@pytest.mark.parametrize("missing", SCOPE_TABLE)
def test_custom_caller_lacking_one_scope_may_not_create_sdk_integration_key(
    client, org, custom, missing
):
    held = [scope for scope in SCOPE_TABLE if scope != missing]
    caller = custom(*held)
    before = _count(client, org)
    response = _create(client, caller, {"name": "sdk", "kind": "sdk_integration"})
    problem = _assert_problem(response, 403, "scope_exceeds_caller")
    _assert_names_excess(problem, [missing], held)
    assert _count(client, org) == before


# --- update and delete of a stronger key ----------------------------------------------------


TARGETS_STRONGER_THAN_MONITOR_READ = pytest.mark.parametrize(
    ("kind", "scopes"),
    [
        ("sdk_integration", ()),
        ("telemetry", ()),
        ("custom", ("monitor:read", "site:read")),
        ("custom", ("monitor:write",)),
    ],
    ids=["sdk", "telemetry", "custom-superset", "custom-other"],
)


@TARGETS_STRONGER_THAN_MONITOR_READ
@pytest.mark.parametrize(
    "body",
    [{"name": "mine now"}, {"scopes": ["monitor:read"]}, {"name": "x", "scopes": ["monitor:read"]}],
    ids=["rename", "narrow", "both"],
)
def test_update_of_key_stronger_than_caller_is_forbidden(
    client, org, custom, key_with, kind, scopes, body
):
    target = key_with(kind, *scopes)
    before = _read(client, target, org)
    response = client.put(f"/api/keys/{target}", json=body, auth=custom("monitor:read"))
    _assert_problem(response, 403, "forbidden")
    assert _read(client, target, org) == before


@TARGETS_STRONGER_THAN_MONITOR_READ
def test_delete_of_key_stronger_than_caller_is_forbidden(
    client, org, custom, key_with, kind, scopes
):
    target, caller = key_with(kind, *scopes), custom("monitor:read")
    before = _count(client, org)
    response = client.delete(f"/api/keys/{target}", auth=caller)
    _assert_problem(response, 403, "forbidden")
    assert _count(client, org) == before
    _read(client, target, org)


def test_custom_caller_may_not_delete_the_organization_sdk_key(client, org, custom):
    caller = custom(*SCOPE_TABLE[:-1])
    _assert_problem(client.delete(f"/api/keys/{org.sdk}", auth=caller), 403, "forbidden")
    assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 200


@pytest.mark.parametrize(
    ("held", "current", "new", "excess"),
    [
        (["monitor:read"], ["monitor:read"], ["monitor:read", "site:write"], ["site:write"]),
        (
            ["site:read", "issue:read"],
            ["site:read"],
            ["issue:write", "site:read", "integration:read"],
            ["issue:write", "integration:read"],
        ),
        (["monitor:read", "monitor:write"], ["monitor:write"], ["site:read"], ["site:read"]),
    ],
    ids=["add-one", "add-two", "swap"],
)
def test_update_adding_scopes_beyond_caller_is_refused_naming_them(
    client, org, custom, key_with, held, current, new, excess
):
    target = key_with("custom", *current)
    before = _read(client, target, org)
    response = client.put(f"/api/keys/{target}", json={"scopes": new}, auth=custom(*held))
    problem = _assert_problem(response, 403, "scope_exceeds_caller")
    _assert_names_excess(problem, excess, held)
    assert _read(client, target, org) == before


# --- update and delete of a weaker or equal key ---------------------------------------------


CALLER = ("monitor:read", "site:read", "issue:write")


@pytest.mark.parametrize(
    ("current", "body", "expected"),
    [
        (["monitor:read"], {"name": "renamed"}, ["monitor:read"]),
        (list(CALLER), {"name": "renamed"}, list(CALLER)),
        (["site:read"], {"scopes": ["site:read", "issue:write"]}, ["site:read", "issue:write"]),
        (list(CALLER), {"scopes": ["issue:write"]}, ["issue:write"]),
        (["monitor:read"], {"scopes": list(CALLER)}, list(CALLER)),
    ],
    ids=["rename-weaker", "rename-equal", "widen-within", "narrow-equal", "widen-to-equal"],
)
def test_key_may_update_a_weaker_or_equal_key(client, custom, key_with, current, body, expected):
    target = key_with("custom", *current)
    response = client.put(f"/api/keys/{target}", json=body, auth=custom(*CALLER))
    assert response.status_code == 200, response.json
    assert response.json["scopes"] == expected
    if "name" in body:
        assert response.json["name"] == "renamed"


@pytest.mark.parametrize("current", [["monitor:read"], list(CALLER), ["issue:write", "site:read"]])
def test_key_may_delete_a_weaker_or_equal_key(client, org, custom, key_with, current):
    target = key_with("custom", *current)
    caller = custom(*CALLER)
    before = _count(client, org)
    response = client.delete(f"/api/keys/{target}", auth=caller)
    assert response.status_code == 204, response.json
    assert response.get_data() == b""
    assert _count(client, org) == before - 1
    _assert_problem(client.get(f"/api/keys/{target}", auth=caller), 404, "not_found")


def test_custom_key_holding_monitor_telemetry_may_rename_and_delete_a_telemetry_key(
    client, custom, key_with
):
    target = key_with("telemetry")
    caller = custom("monitor:telemetry")
    response = client.put(f"/api/keys/{target}", json={"name": "renamed"}, auth=caller)
    assert response.status_code == 200, response.json
    assert client.delete(f"/api/keys/{target}", auth=caller).status_code == 204


def test_sdk_key_may_create_update_and_delete_every_kind(client, org, sdk, key_with):
    bodies = [
        {"name": "t", "kind": "telemetry"},
        {"name": "s", "kind": "sdk_integration"},
        {"name": "c", "kind": "custom", "scopes": SCOPE_TABLE},
    ]
    created = [_create(client, sdk, body) for body in bodies]
    assert [response.status_code for response in created] == [201, 201, 201]
    references = [response.json["key"] for response in created]
    references += [key_with("sdk_integration"), org.telemetry]
    for reference in references:
        response = client.put(f"/api/keys/{reference}", json={"name": "renamed"}, auth=sdk)
        assert response.status_code == 200, response.json
    response = client.put(f"/api/keys/{references[2]}", json={"scopes": ["site:read"]}, auth=sdk)
    assert response.status_code == 200, response.json
    assert response.json["scopes"] == ["site:read"]
    for reference in references:
        assert client.delete(f"/api/keys/{reference}", auth=sdk).status_code == 204
    assert _count(client, org) == 1


@pytest.mark.parametrize("method", ["get", "put", "delete"])
@pytest.mark.parametrize("form", ["identifier", "shown", "full"])
def test_key_of_another_organization_is_not_found_never_forbidden(
    client, org, other_org, custom, method, form
):
    shown = _read(client, other_org.sdk, other_org)["key"]
    reference = {
        "identifier": shown.removesuffix("..."),
        "shown": shown,
        "full": other_org.sdk,
    }[form]
    before = _read(client, other_org.sdk, other_org)
    for caller in (custom("monitor:read"), (org.sdk, "")):
        response = client.open(
            f"/api/keys/{reference}", method=method, json={"name": "stolen"}, auth=caller
        )
        _assert_problem(response, 404, "not_found")
    assert _read(client, other_org.sdk, other_org) | {"last_used": None} == before | {
        "last_used": None
    }


# --- the order of refusals: routing, 401, 403 telemetry, 404 key, 415, 413, 400, 422, 403, 409


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("patch", "/api/keys/ak_000000000000", 405, "method_not_allowed"),
        ("post", "/api/keys/ak_000000000000", 405, "method_not_allowed"),
        ("delete", "/api/keys", 405, "method_not_allowed"),
        ("get", "/api/keyz", 404, "not_found"),
        ("put", "/api/keys/a/b", 404, "not_found"),
    ],
)
@pytest.mark.parametrize("credentials", ["none", "unknown", "telemetry"])
def test_routing_refusals_come_before_authentication(
    client, org, method, path, status, code, credentials
):
    auth = {"none": None, "unknown": ("ak_nope", ""), "telemetry": (org.telemetry, "")}
    response = client.open(path, method=method, data="{", auth=auth[credentials])
    _assert_problem(response, status, code)


@pytest.mark.parametrize("auth", [None, ("ak_nope", ""), ("", "")], ids=["none", "bad", "empty"])
@pytest.mark.parametrize(
    ("method", "path"),
    [("put", f"/api/keys/{UNKNOWN_IDENTIFIER}"), ("post", "/api/keys"), ("delete", "/api/keys/x")],
)
def test_authentication_comes_before_unknown_key_and_body_checks(client, org, auth, method, path):
    response = client.open(path, method=method, data="not json", auth=auth)
    problem = _assert_problem(response, 401, "unauthorized")
    assert problem["status"] == 401
    assert response.headers["WWW-Authenticate"] == 'Basic realm="api"'


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("put", f"/api/keys/{UNKNOWN_IDENTIFIER}", {"data": "{"}),
        ("post", "/api/keys", {"data": "x", "content_type": "text/plain"}),
        ("post", "/api/keys", {"json": {"name": "", "kind": "custom", "scopes": SCOPE_TABLE}}),
        ("delete", f"/api/keys/{UNKNOWN_IDENTIFIER}", {}),
    ],
    ids=["put-unknown-key", "post-media-type", "post-invalid-and-exceeding", "delete-unknown"],
)
def test_telemetry_caller_is_forbidden_before_unknown_key_and_body_checks(
    client, org, method, path, kwargs
):
    response = client.open(path, method=method, auth=(org.telemetry, ""), **kwargs)
    _assert_problem(response, 403, "forbidden")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"data": '{"name": "x"}', "content_type": "text/plain"},
        {"data": '{"name": "x"}'},
        {"json": {"name": OVERSIZED_NAME}},
        {"data": "{not json", "content_type": "application/json"},
        {"json": ["name", "x"]},
        {"json": {}},
        {"json": {"name": ""}},
        {"json": {"scopes": SCOPE_TABLE}},
    ],
    ids=[
        "415-text-plain",
        "415-no-type",
        "413-oversized",
        "400-bad-json",
        "400-array",
        "422-empty",
        "422-bad-name",
        "403-wide",
    ],
)
@pytest.mark.parametrize(
    "reference",
    [UNKNOWN_IDENTIFIER, f"{UNKNOWN_IDENTIFIER}...", "not-a-key", "ak_" + "x" * 50],
    ids=["identifier", "shown", "malformed", "bad-full"],
)
def test_put_of_unknown_key_is_not_found_before_body_checks(client, custom, kwargs, reference):
    response = client.put(f"/api/keys/{reference}", auth=custom("monitor:read"), **kwargs)
    _assert_problem(response, 404, "not_found")


@pytest.mark.parametrize(
    ("kwargs", "status", "code"),
    [
        ({"data": "{", "content_type": "text/plain"}, 415, "unsupported_media_type"),
        ({"data": "{" * 70_000, "content_type": "text/plain"}, 415, "unsupported_media_type"),
        ({"data": "{" * 70_000, "content_type": "application/json"}, 413, "payload_too_large"),
        (
            {"json": {"name": OVERSIZED_NAME, "kind": "custom", "scopes": SCOPE_TABLE}},
            413,
            "payload_too_large",
        ),
        ({"data": "{", "content_type": "application/json"}, 400, "bad_request"),
        ({"json": [{"name": "x", "kind": "custom"}]}, 400, "bad_request"),
        ({"json": {"name": "", "kind": "custom", "scopes": SCOPE_TABLE}}, 422, "validation_error"),
        (
            {"json": {"name": "x", "kind": "custom", "scopes": ["site:write", "nope"]}},
            422,
            "validation_error",
        ),
        ({"json": {"name": "x", "kind": "sdk_integration", "extra": 1}}, 422, "validation_error"),
        ({"json": {"name": "x", "kind": "telemetry", "scopes": []}}, 422, "validation_error"),
    ],
    ids=[
        "415-over-400",
        "415-over-413",
        "413-over-400",
        "413-over-403",
        "400-over-403",
        "400-array",
        "422-name-over-403",
        "422-scope-over-403",
        "422-field-over-403",
        "422-fixed-over-403",
    ],
)
def test_create_refusals_follow_the_contract_order(client, org, custom, kwargs, status, code):
    caller = custom("monitor:read")
    before = _count(client, org)
    response = client.post("/api/keys", auth=caller, **kwargs)
    _assert_problem(response, status, code)
    assert _count(client, org) == before


@pytest.mark.parametrize(
    "body",
    [
        {"name": ""},
        {"name": "x", "colour": "red"},
        {"scopes": ["nope"]},
        {"scopes": None},
        {},
        {"name": "x", "kind": "custom"},
    ],
    ids=["bad-name", "unknown-field", "unknown-scope", "null-scopes", "nothing", "kind-change"],
)
def test_update_validation_comes_before_permissions(client, org, custom, key_with, body):
    target = key_with("sdk_integration")
    before = _read(client, target, org)
    response = client.put(f"/api/keys/{target}", json=body, auth=custom("monitor:read"))
    _assert_problem(response, 422, "validation_error")
    assert _read(client, target, org) == before


def test_update_empty_scopes_on_stronger_custom_key_is_validation_error(
    client, org, custom, key_with
):
    target = key_with("custom", "monitor:write", "site:write")
    before = _read(client, target, org)
    response = client.put(f"/api/keys/{target}", json={"scopes": []}, auth=custom("site:read"))
    _assert_problem(response, 422, "validation_error")
    assert _read(client, target, org) == before


def test_update_of_stronger_immutable_key_scopes_is_forbidden_not_conflict(
    client, org, custom, key_with
):
    target = key_with("sdk_integration")
    before = _read(client, target, org)
    response = client.put(
        f"/api/keys/{target}", json={"scopes": ["monitor:read"]}, auth=custom("monitor:read")
    )
    _assert_problem(response, 403, "forbidden")
    assert _read(client, target, org) == before


def test_update_of_immutable_key_beyond_caller_is_scope_exceeds_not_conflict(
    client, org, custom, key_with
):
    target = key_with("telemetry")
    before = _read(client, target, org)
    body = {"scopes": ["monitor:telemetry", "monitor:read"]}
    response = client.put(f"/api/keys/{target}", json=body, auth=custom("monitor:telemetry"))
    problem = _assert_problem(response, 403, "scope_exceeds_caller")
    _assert_names_excess(problem, ["monitor:read"], ["monitor:telemetry"])
    assert _read(client, target, org) == before


@pytest.mark.parametrize(
    "body",
    [
        {"name": "", "scopes": ["monitor:read"]},
        {"scopes": ["monitor:read"], "kind": "custom"},
        {"scopes": ["monitor:read"], "extra": True},
    ],
    ids=["bad-name", "kind-change", "unknown-field"],
)
def test_update_validation_comes_before_immutable_conflict(client, org, sdk, key_with, body):
    target = key_with("telemetry")
    before = _read(client, target, org)
    response = client.put(f"/api/keys/{target}", json=body, auth=sdk)
    _assert_problem(response, 422, "validation_error")
    assert _read(client, target, org) == before


def test_delete_of_unknown_key_is_not_found_even_for_a_weak_caller(client, custom):
    response = client.delete(f"/api/keys/{UNKNOWN_IDENTIFIER}", auth=custom("monitor:read"))
    _assert_problem(response, 404, "not_found")
