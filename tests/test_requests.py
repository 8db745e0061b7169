"""Requests and responses (docs/design.md, "Requests and errors"): media type, size, JSON, routing
errors, the problem+json shape, the order of refusals, server faults, caching."""

from __future__ import annotations

import io
import json
import logging

import pytest

from app.domain.keyformat import identifier_of, new_key
from app.keys import service

PROBLEM_JSON = "application/problem+json"
PROBLEM_FIELDS = {"type", "title", "status", "detail", "code"}
LIMIT = 64 * 1024
NEW_KEY = {"name": "made by test", "kind": "custom", "scopes": ["monitor:read"]}


def assert_problem(response, status: int, code: str) -> None:
    """An error in the problem shape, with this status and code."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == PROBLEM_JSON
    body = json.loads(response.get_data(as_text=True))
    assert PROBLEM_FIELDS <= set(body) <= PROBLEM_FIELDS | {"errors"}
    assert body["status"] == status
    assert body["code"] == code
    for field in ("type", "title", "detail", "code"):
        assert isinstance(body[field], str)
        assert body[field]
    if "errors" in body:
        assert isinstance(body["errors"], dict)
        for messages in body["errors"].values():
            assert isinstance(messages, list)
            assert all(isinstance(message, str) for message in messages)


def padded(body: dict, size: int) -> bytes:
    """`body` as JSON, padded with trailing white space to exactly `size` bytes."""
    raw = json.dumps(body).encode()
    assert len(raw) <= size
    return raw + b" " * (size - len(raw))


@pytest.fixture
def target(make_key) -> str:
    """The identifier of a custom key to update."""
    return identifier_of(make_key(name="target"))


# The two endpoints that read a body: name -> (method, path template)
WRITES = {"create": ("POST", "/api/keys"), "update": ("PUT", "/api/keys/{target}")}


def write(client, endpoint: str, target: str, **kwargs):
    method, path = WRITES[endpoint]
    return client.open(path.format(target=target), method=method, **kwargs)


# --- 415: the media type --------------------------------------------------------------------

BODY = json.dumps({"name": "renamed", "kind": "custom", "scopes": ["monitor:read"]})
NOT_JSON_MEDIA = {
    "text/plain": dict(data=BODY, content_type="text/plain"),
    "form": dict(data={"name": "renamed", "kind": "custom", "scopes": "monitor:read"}),
    "multipart": dict(data={"name": "renamed", "file": (io.BytesIO(b"{}"), "body.json")}),
    "no content type": dict(data=BODY.encode()),
    "text/json": dict(data=BODY, content_type="text/json"),
    "application/xml": dict(data="<key/>", content_type="application/xml"),
    "application/jsonp": dict(data=BODY, content_type="application/jsonp"),
}


@pytest.mark.parametrize("endpoint", list(WRITES))
@pytest.mark.parametrize("media", list(NOT_JSON_MEDIA))
def test_body_not_sent_as_application_json_is_415(client, org, target, endpoint, media):
    kwargs = dict(NOT_JSON_MEDIA[media])
    if media == "multipart":
        kwargs["data"] = {"name": "renamed", "file": (io.BytesIO(b"{}"), "body.json")}
    response = write(client, endpoint, target, auth=(org.sdk, ""), **kwargs)
    assert_problem(response, 415, "unsupported_media_type")
    assert client.get("/api/keys", auth=(org.sdk, "")).json["total_count"] == 3
    assert client.get(f"/api/keys/{target}", auth=(org.sdk, "")).json["name"] == "target"


def test_no_content_type_really_sends_none(client, org):
    response = client.post("/api/keys", data=BODY.encode(), auth=(org.sdk, ""))
    assert response.request.headers.get("Content-Type") is None
    assert_problem(response, 415, "unsupported_media_type")


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON"],
)
def test_application_json_with_parameters_or_any_case_is_accepted(client, org, content_type):
    response = client.post(
        "/api/keys", data=json.dumps(NEW_KEY), content_type=content_type, auth=(org.sdk, "")
    )
    assert response.status_code == 201, response.get_data(as_text=True)


# --- 413: the size ----------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", list(WRITES))
def test_body_over_64_kib_is_413(client, org, target, endpoint):
    body = padded({"name": "renamed"}, LIMIT + 1)
    response = write(
        client, endpoint, target, data=body, content_type="application/json", auth=(org.sdk, "")
    )
    assert_problem(response, 413, "payload_too_large")
    assert client.get(f"/api/keys/{target}", auth=(org.sdk, "")).json["name"] == "target"


def test_body_far_over_64_kib_is_413(client, org):
    body = json.dumps(NEW_KEY | {"name": "x" * (1024 * 1024)})
    response = client.post(
        "/api/keys", data=body, content_type="application/json", auth=(org.sdk, "")
    )
    assert_problem(response, 413, "payload_too_large")
    assert client.get("/api/keys", auth=(org.sdk, "")).json["total_count"] == 2


def test_body_of_exactly_64_kib_is_accepted(client, org):
    body = padded(NEW_KEY, LIMIT)
    response = client.post(
        "/api/keys", data=body, content_type="application/json", auth=(org.sdk, "")
    )
    assert response.status_code == 201, response.get_data(as_text=True)


# --- 400: not JSON, or not a JSON object ------------------------------------------------------

NOT_A_JSON_OBJECT = {
    "empty body": b"",
    "white space": b"   \n",
    "invalid json": b'{"name": ',
    "single quotes": b"{'name': 'x'}",
    "trailing comma": b'{"name": "x",}',
    "trailing garbage": b'{"name": "x"} x',
    "json array": b'[{"name": "x", "kind": "custom", "scopes": ["monitor:read"]}]',
    "empty array": b"[]",
    "json string": b'"name"',
    "json number": b"42",
    "json true": b"true",
    "json null": b"null",
    "NaN literal": b'{"name": NaN, "kind": "custom", "scopes": ["monitor:read"]}',
    "Infinity literal": b'{"name": "x", "kind": "custom", "a": Infinity}',
    "-Infinity literal": b'{"name": -Infinity}',
    "bare NaN": b"NaN",
    "not utf-8": b'{"name": "\xff\xfe"}',
    "deeply nested": b'{"name": ' + b"[" * 30000 + b"]" * 30000 + b"}",
    "a member named twice": b'{"name": "a", "name": "b", "kind": "custom"}',
    "a nested member named twice": b'{"name": "a", "x": {"k": 1, "k": 2}}',
}


@pytest.mark.parametrize("endpoint", list(WRITES))
@pytest.mark.parametrize("body", list(NOT_A_JSON_OBJECT))
def test_body_that_is_not_a_json_object_is_400(client, org, target, endpoint, body):
    response = write(
        client,
        endpoint,
        target,
        data=NOT_A_JSON_OBJECT[body],
        content_type="application/json",
        auth=(org.sdk, ""),
    )
    assert_problem(response, 400, "bad_request")
    assert client.get("/api/keys", auth=(org.sdk, "")).json["total_count"] == 3
    assert client.get(f"/api/keys/{target}", auth=(org.sdk, "")).json["name"] == "target"


# --- routing errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/index.html",
        "/api",
        "/api/nothing",
        "/api/keys/a/b",
        "/api/v1/keys",
        "/keys",
        "//api//keys",
    ],
)
@pytest.mark.parametrize("credentials", ["none", "sdk"])
def test_unknown_path_is_404_problem_json(client, org, path, credentials):
    auth = (org.sdk, "") if credentials == "sdk" else None
    # A full URL: alone, "//api//keys" would be read as the host "api" with an empty path.
    response = client.get("http://localhost" + path, auth=auth)
    assert_problem(response, 404, "not_found")
    assert "WWW-Authenticate" not in response.headers


WRONG_METHODS = {
    "PATCH /api/keys": ("PATCH", "/api/keys", {"GET", "POST"}),
    "DELETE /api/keys": ("DELETE", "/api/keys", {"GET", "POST"}),
    "PUT /api/keys": ("PUT", "/api/keys", {"GET", "POST"}),
    "POST /api/keys/<id>": ("POST", "/api/keys/{target}", {"GET", "PUT", "DELETE"}),
    "PATCH /api/keys/<id>": ("PATCH", "/api/keys/{target}", {"GET", "PUT", "DELETE"}),
    "OPTIONS /api/keys": ("OPTIONS", "/api/keys", {"GET", "POST"}),
    "OPTIONS /api/keys/<id>": ("OPTIONS", "/api/keys/{target}", {"GET", "PUT", "DELETE"}),
}


@pytest.mark.parametrize("case", list(WRONG_METHODS))
@pytest.mark.parametrize("credentials", ["none", "sdk", "telemetry"])
def test_wrong_method_is_405_problem_json_with_allow(client, org, target, case, credentials):
    method, path, allowed = WRONG_METHODS[case]
    auth = {"none": None, "sdk": (org.sdk, ""), "telemetry": (org.telemetry, "")}[credentials]
    response = client.open(path.format(target=target), method=method, json={"name": "x"}, auth=auth)
    assert_problem(response, 405, "method_not_allowed")
    allow = {value.strip() for value in response.headers["Allow"].split(",")}
    assert allowed <= allow
    assert method not in allow
    assert "WWW-Authenticate" not in response.headers


def test_routing_error_writes_nothing(client, org, target):
    response = client.post(f"/api/keys/{target}", json={"name": "x"}, auth=(org.sdk, ""))
    assert response.status_code == 405
    assert client.get(f"/api/keys/{target}", auth=(org.sdk, "")).json["name"] == "target"


# --- every error is problem+json --------------------------------------------------------------


def _no_credentials(client, org, make_key, target):
    return client.get("/api/keys")


def _telemetry(client, org, make_key, target):
    return client.get("/api/keys", auth=(org.telemetry, ""))


def _scope_exceeds(client, org, make_key, target):
    weak = make_key(scopes=["monitor:read"])
    body = NEW_KEY | {"scopes": ["site:write"]}
    return client.post("/api/keys", json=body, auth=(weak, ""))


def _more_powerful_target(client, org, make_key, target):
    weak = make_key(scopes=["monitor:read"])
    return client.delete(f"/api/keys/{identifier_of(org.sdk)}", auth=(weak, ""))


def _unknown_key(client, org, make_key, target):
    return client.get(f"/api/keys/{identifier_of(new_key('ak_')[1])}", auth=(org.sdk, ""))


def _unknown_path(client, org, make_key, target):
    return client.get("/api/unknown", auth=(org.sdk, ""))


def _wrong_method(client, org, make_key, target):
    return client.patch("/api/keys", auth=(org.sdk, ""))


def _immutable(client, org, make_key, target):
    reference = identifier_of(org.telemetry)
    return client.put(
        f"/api/keys/{reference}", json={"scopes": ["monitor:read"]}, auth=(org.sdk, "")
    )


def _too_large(client, org, make_key, target):
    body = padded(NEW_KEY, LIMIT + 1)
    return client.post("/api/keys", data=body, content_type="application/json", auth=(org.sdk, ""))


def _media_type(client, org, make_key, target):
    return client.post("/api/keys", data="x", content_type="text/plain", auth=(org.sdk, ""))


def _bad_json(client, org, make_key, target):
    return client.post("/api/keys", data="{", content_type="application/json", auth=(org.sdk, ""))


def _invalid_field(client, org, make_key, target):
    return client.post("/api/keys", json=NEW_KEY | {"name": ""}, auth=(org.sdk, ""))


def _invalid_query(client, org, make_key, target):
    return client.get("/api/keys?page_size=0", auth=(org.sdk, ""))


ERRORS = {
    "401": (_no_credentials, 401, "unauthorized"),
    "403 telemetry": (_telemetry, 403, "forbidden"),
    "403 scope": (_scope_exceeds, 403, "scope_exceeds_caller"),
    "403 target": (_more_powerful_target, 403, "forbidden"),
    "404 key": (_unknown_key, 404, "not_found"),
    "404 path": (_unknown_path, 404, "not_found"),
    "405": (_wrong_method, 405, "method_not_allowed"),
    "409": (_immutable, 409, "immutable_key"),
    "413": (_too_large, 413, "payload_too_large"),
    "415": (_media_type, 415, "unsupported_media_type"),
    "400": (_bad_json, 400, "bad_request"),
    "422 body": (_invalid_field, 422, "validation_error"),
    "422 query": (_invalid_query, 422, "validation_error"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_every_error_is_problem_json_with_status_equal_to_http_status(
    client, org, make_key, target, case
):
    make, status, code = ERRORS[case]
    response = make(client, org, make_key, target)
    assert_problem(response, status, code)


@pytest.mark.parametrize("case", ["422 body", "422 query", "403 scope"])
def test_field_errors_map_a_field_to_its_messages(client, org, make_key, target, case):
    make, _, _ = ERRORS[case]
    errors = make(client, org, make_key, target).json["errors"]
    field = {"422 body": "name", "422 query": "page_size", "403 scope": "scopes"}[case]
    assert errors[field]


# --- the order of refusals ------------------------------------------------------------------

TOO_LARGE_TEXT = "x" * (LIMIT + 1)
TOO_LARGE_INVALID_JSON = b"{" * (LIMIT + 1)
TOO_LARGE_INVALID_FIELDS = padded({"name": "", "kind": "nope", "extra": 1}, LIMIT + 1)


@pytest.mark.parametrize("endpoint", list(WRITES))
@pytest.mark.parametrize(
    "body",
    [TOO_LARGE_TEXT, '{"name": ', json.dumps({"name": ""})],
    ids=["too large", "invalid json", "invalid field"],
)
def test_415_beats_413_400_and_422(client, org, target, endpoint, body):
    response = write(
        client, endpoint, target, data=body, content_type="text/plain", auth=(org.sdk, "")
    )
    assert_problem(response, 415, "unsupported_media_type")


@pytest.mark.parametrize("endpoint", list(WRITES))
@pytest.mark.parametrize(
    "body",
    [TOO_LARGE_INVALID_JSON, TOO_LARGE_INVALID_FIELDS],
    ids=["invalid json", "invalid field"],
)
def test_413_beats_400_and_422(client, org, target, endpoint, body):
    response = write(
        client, endpoint, target, data=body, content_type="application/json", auth=(org.sdk, "")
    )
    assert_problem(response, 413, "payload_too_large")


@pytest.mark.parametrize("endpoint", list(WRITES))
@pytest.mark.parametrize(
    "body",
    [b'[{"name": ""}]', b'{"name": "", "kind": NaN}', b'{"name": "", "unknown": 1,'],
    ids=["array of invalid", "NaN beside invalid", "truncated invalid"],
)
def test_400_beats_422(client, org, target, endpoint, body):
    response = write(
        client, endpoint, target, data=body, content_type="application/json", auth=(org.sdk, "")
    )
    assert_problem(response, 400, "bad_request")


# Bodies for PUT that would be refused once the key were found.
REFUSED_BODIES = {
    "415": dict(data='{"name": "x"}', content_type="text/plain"),
    "413": dict(data=padded({"name": "x"}, LIMIT + 1), content_type="application/json"),
    "400": dict(data="{", content_type="application/json"),
    "422": dict(json={"name": ""}),
}


@pytest.mark.parametrize("refusal", list(REFUSED_BODIES))
def test_404_unknown_key_beats_415_413_400_and_422(client, org, refusal):
    unknown = identifier_of(new_key("ak_")[1])
    response = client.put(f"/api/keys/{unknown}", auth=(org.sdk, ""), **REFUSED_BODIES[refusal])
    assert_problem(response, 404, "not_found")


def test_422_beats_403_for_permissions_on_create(client, make_key):
    weak = make_key(scopes=["monitor:read"])
    body = {"name": "", "kind": "custom", "scopes": ["site:write"]}
    response = client.post("/api/keys", json=body, auth=(weak, ""))
    assert_problem(response, 422, "validation_error")


def test_422_beats_403_for_permissions_on_update(client, org, make_key):
    weak = make_key(scopes=["monitor:read"])
    response = client.put(f"/api/keys/{identifier_of(org.sdk)}", json={"name": ""}, auth=(weak, ""))
    assert_problem(response, 422, "validation_error")


def test_403_forbidden_beats_409(client, org, make_key):
    weak = make_key(scopes=["monitor:read"])
    response = client.put(
        f"/api/keys/{identifier_of(org.telemetry)}", json={"scopes": ["site:read"]}, auth=(weak, "")
    )
    assert_problem(response, 403, "forbidden")


def test_403_scope_exceeds_caller_beats_409(client, org, make_key):
    caller = make_key(scopes=["monitor:read", "monitor:telemetry"])
    response = client.put(
        f"/api/keys/{identifier_of(org.telemetry)}",
        json={"scopes": ["site:write"]},
        auth=(caller, ""),
    )
    assert_problem(response, 403, "scope_exceeds_caller")


# Requests that would be refused for a later reason: name -> (method, path, kwargs)
LATER_REFUSALS = {
    "unknown key get": ("GET", "/api/keys/ak_000000000000", {}),
    "unknown key put": ("PUT", "/api/keys/ak_000000000000", {"json": {"name": "x"}}),
    "unknown key delete": ("DELETE", "/api/keys/ak_000000000000", {}),
    "415": ("POST", "/api/keys", {"data": "x", "content_type": "text/plain"}),
    "413": (
        "POST",
        "/api/keys",
        {"data": padded(NEW_KEY, LIMIT + 1), "content_type": "application/json"},
    ),
    "400": ("POST", "/api/keys", {"data": "{", "content_type": "application/json"}),
    "422 body": ("POST", "/api/keys", {"json": {"name": ""}}),
    "422 query": ("GET", "/api/keys?page=0&kind=nope", {}),
    "403 scope": ("POST", "/api/keys", {"json": NEW_KEY | {"scopes": ["site:write"]}}),
    "409": ("PUT", "/api/keys/{telemetry}", {"json": {"scopes": ["site:read"]}}),
}


def later(org, case: str) -> tuple[str, str, dict]:
    method, path, kwargs = LATER_REFUSALS[case]
    return method, path.format(telemetry=identifier_of(org.telemetry)), kwargs


@pytest.mark.parametrize("case", list(LATER_REFUSALS))
@pytest.mark.parametrize("credentials", ["none", "unknown key", "bad scheme"])
def test_401_beats_every_refusal_but_routing(client, org, case, credentials):
    method, path, kwargs = later(org, case)
    headers = {
        "none": {},
        "unknown key": {"Authorization": f"Bearer {new_key('ak_')[1]}"},
        "bad scheme": {"Authorization": f"Token {org.sdk}"},
    }[credentials]
    response = client.open(path, method=method, headers=headers, **kwargs)
    assert_problem(response, 401, "unauthorized")
    assert response.headers["WWW-Authenticate"] == 'Basic realm="api"'


@pytest.mark.parametrize("case", [case for case in LATER_REFUSALS if case != "409"])
def test_telemetry_403_beats_404_and_every_later_refusal(client, org, case):
    method, path, kwargs = later(org, case)
    response = client.open(path, method=method, auth=(org.telemetry, ""), **kwargs)
    assert_problem(response, 403, "forbidden")


def test_telemetry_403_beats_409_on_its_own_key(client, org):
    method, path, kwargs = later(org, "409")
    response = client.open(path, method=method, auth=(org.telemetry, ""), **kwargs)
    assert_problem(response, 403, "forbidden")


# --- server faults --------------------------------------------------------------------------


def _explode(*args, **kwargs):
    raise RuntimeError("boom: a secret detail from deep inside")


FAULTS = {
    "list": ("list_keys", "GET", "/api/keys", {}),
    "get": ("find_key", "GET", "/api/keys/{target}", {}),
    "create": ("create_key", "POST", "/api/keys", {"json": NEW_KEY}),
    "delete": ("delete_key", "DELETE", "/api/keys/{target}", {}),
}


@pytest.fixture
def faulty(app, monkeypatch):
    """Let a fault reach the error handlers instead of the test (as in production)."""
    app.config["PROPAGATE_EXCEPTIONS"] = False

    def break_(function: str) -> None:
        monkeypatch.setattr(service, function, _explode)

    return break_


@pytest.mark.parametrize("fault", list(FAULTS))
def test_server_fault_is_500_problem_json_without_stack_trace(client, org, target, faulty, fault):
    function, method, path, kwargs = FAULTS[fault]
    faulty(function)
    response = client.open(path.format(target=target), method=method, auth=(org.sdk, ""), **kwargs)
    assert response.status_code == 500
    assert response.mimetype == PROBLEM_JSON
    body = response.json
    assert PROBLEM_FIELDS <= set(body) <= PROBLEM_FIELDS | {"errors"}
    assert body["status"] == 500
    assert isinstance(body["code"], str)
    assert body["code"]
    text = response.get_data(as_text=True)
    for leak in ("Traceback", "boom", "secret detail", "RuntimeError", 'File "', ".py"):
        assert leak not in text
    assert org.sdk not in text


def test_server_fault_log_never_carries_a_full_key(client, org, faulty, caplog):
    faulty("find_key")
    with caplog.at_level(logging.DEBUG):
        response = client.get(
            f"/api/keys/{org.sdk}", headers={"Authorization": f"Bearer {org.sdk}"}
        )
    assert response.status_code == 500
    assert caplog.records, "the fault should be logged"
    assert org.sdk not in caplog.text
    assert all(org.sdk not in str(record.args) for record in caplog.records)


# --- caching --------------------------------------------------------------------------------

RESPONSES = {
    "list": ("GET", "/api/keys", {}, "sdk", 200),
    "create": ("POST", "/api/keys", {"json": NEW_KEY}, "sdk", 201),
    "get": ("GET", "/api/keys/{target}", {}, "sdk", 200),
    "update": ("PUT", "/api/keys/{target}", {"json": {"name": "x"}}, "sdk", 200),
    "delete": ("DELETE", "/api/keys/{target}", {}, "sdk", 204),
    "401": ("GET", "/api/keys", {}, None, 401),
    "403": ("GET", "/api/keys", {}, "telemetry", 403),
    "404": ("GET", "/api/keys/ak_000000000000", {}, "sdk", 404),
    "422": ("GET", "/api/keys?page=0", {}, "sdk", 422),
}


@pytest.mark.parametrize("case", list(RESPONSES))
def test_responses_of_api_keys_carry_cache_control_no_store(client, org, target, case):
    method, path, kwargs, caller, status = RESPONSES[case]
    auth = {"sdk": (org.sdk, ""), "telemetry": (org.telemetry, ""), None: None}[caller]
    response = client.open(path.format(target=target), method=method, auth=auth, **kwargs)
    assert response.status_code == status
    assert response.headers.getlist("Cache-Control") == ["no-store"]
