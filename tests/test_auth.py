"""Authentication (docs/design.md; spec section 5): who may call the key endpoints."""

from __future__ import annotations

import base64

import pytest

from app.domain.keyformat import identifier_of, new_key

CHALLENGE = 'Basic realm="api"'
PROBLEM_JSON = "application/problem+json"
NEW_KEY = {"name": "made by test", "kind": "custom", "scopes": ["monitor:read"]}


def basic(value: str) -> dict[str, str]:
    """An Authorization header carrying `value` as the Basic credentials, as given."""
    return {"Authorization": "Basic " + base64.b64encode(value.encode()).decode()}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def assert_problem(response, status: int, code: str) -> None:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == PROBLEM_JSON
    assert response.json["status"] == status
    assert response.json["code"] == code


def assert_unauthorized(response) -> None:
    assert_problem(response, 401, "unauthorized")
    assert response.headers.get_all("WWW-Authenticate") == [CHALLENGE]


def call(client, endpoint: str, reference: str, **kwargs):
    """One request to one of the five key-management endpoints."""
    method, path, body = ENDPOINTS[endpoint]
    url = path.format(reference=reference)
    if body is not None:
        kwargs["json"] = body
    return client.open(url, method=method, **kwargs)


# name -> (method, path, JSON body)
ENDPOINTS = {
    "list": ("GET", "/api/keys", None),
    "create": ("POST", "/api/keys", NEW_KEY),
    "get": ("GET", "/api/keys/{reference}", None),
    "update": ("PUT", "/api/keys/{reference}", {"name": "renamed"}),
    "delete": ("DELETE", "/api/keys/{reference}", None),
}
SUCCESS = {"list": 200, "create": 201, "get": 200, "update": 200, "delete": 204}


@pytest.fixture
def target(make_key) -> str:
    """The identifier of a weak custom key that the endpoints act on."""
    return identifier_of(make_key(name="target"))


# --- the accepted forms -----------------------------------------------------------------


def test_basic_with_key_as_user_name_and_empty_password_is_accepted(client, org):
    response = client.get("/api/keys", auth=(org.sdk, ""))
    assert response.status_code == 200, response.json


def test_basic_password_is_ignored(client, org):
    response = client.get("/api/keys", auth=(org.sdk, "any password at all"))
    assert response.status_code == 200, response.json


def test_basic_value_without_a_colon_is_the_key_alone(client, org):
    response = client.get("/api/keys", headers=basic(org.sdk))
    assert response.status_code == 200, response.json


def test_bearer_token_is_accepted(client, org):
    response = client.get("/api/keys", headers=bearer(org.sdk))
    assert response.status_code == 200, response.json


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_bearer_token_is_accepted_on_every_endpoint(client, org, target, endpoint):
    response = call(client, endpoint, target, headers=bearer(org.sdk))
    assert response.status_code == SUCCESS[endpoint], response.get_data(as_text=True)


# --- 401 on every protected route ---------------------------------------------------------


def _unknown_key(org) -> str:
    return new_key("ak_")[1]


def _bad_checksum(org) -> str:
    last = org.sdk[-1]
    return org.sdk[:-1] + ("A" if last != "A" else "B")


def _truncated(org) -> str:
    return org.sdk[:-1]


# Ways of presenting no valid key: name -> function(org) -> headers
BAD_CREDENTIALS = {
    "no credentials": lambda org: {},
    "empty header": lambda org: {"Authorization": ""},
    "scheme only basic": lambda org: {"Authorization": "Basic"},
    "scheme only bearer": lambda org: {"Authorization": "Bearer"},
    "no scheme": lambda org: {"Authorization": org.sdk},
    "digest scheme": lambda org: {
        "Authorization": f'Digest username="{org.sdk}", realm="api", nonce="x", response="y"'
    },
    "token scheme": lambda org: {"Authorization": f"Token {org.sdk}"},
    "apikey scheme": lambda org: {"Authorization": f"ApiKey {org.sdk}"},
    "bad base64": lambda org: {"Authorization": "Basic !!!not*base64***"},
    "key as password only": lambda org: basic(":" + org.sdk),
    "key not base64 encoded": lambda org: {"Authorization": f"Basic {org.sdk}:"},
    "bad checksum basic": lambda org: basic(_bad_checksum(org) + ":"),
    "bad checksum bearer": lambda org: bearer(_bad_checksum(org)),
    "truncated key": lambda org: basic(_truncated(org) + ":"),
    "identifier only": lambda org: basic(identifier_of(org.sdk) + ":"),
    "shown form": lambda org: basic(identifier_of(org.sdk) + "...:"),
    "unknown well-formed key basic": lambda org: basic(_unknown_key(org) + ":"),
    "unknown well-formed key bearer": lambda org: bearer(_unknown_key(org)),
    # Bytes that are not ASCII, as a WSGI server hands them on (latin-1): base64 cannot
    # read them, and neither may anything else.
    "basic not ascii": lambda org: {"Authorization": "Basic \xff\xfe\xfd"},
    "basic base64 of bytes not ascii": lambda org: {
        "Authorization": "Basic " + base64.b64encode(b"\xff\xfe:\xfd").decode()
    },
    "bearer not ascii": lambda org: {"Authorization": "Bearer \xe9" + org.sdk[1:]},
    "basic of a key and a nul": lambda org: basic(org.sdk + "\x00:"),
    "placeholder basic": lambda org: basic("ak_...:"),
    "placeholder bearer": lambda org: bearer("ak_..."),
    "shown form bearer": lambda org: bearer(identifier_of(org.sdk) + "..."),
}
# What each 401 says (a person's first clue): that a key is needed, when none was presented
# in Basic or Bearer; else why what was presented is no key, never repeating any of it.
REQUIRED = (
    "A valid API key is required, as the user name of HTTP Basic authentication or as a "
    "Bearer token."
)
NOT_A_WHOLE_KEY = (
    "What was presented is not a whole API key (its length, characters or checksum are "
    "wrong): check it for a typo or a missing part."
)
SHOWN_FORM = (
    "What was presented is a key's shown form (<identifier>...), not the key itself: the "
    "full key was shown once, when the key was created."
)
NO_SUCH_KEY = "No such API key: it may have been deleted, revoked or rotated."
SAID = {
    REQUIRED: (
        "no credentials",
        "empty header",
        "scheme only basic",
        "scheme only bearer",
        "no scheme",
        "digest scheme",
        "token scheme",
        "apikey scheme",
    ),
    SHOWN_FORM: ("shown form", "shown form bearer", "placeholder basic", "placeholder bearer"),
    NO_SUCH_KEY: ("unknown well-formed key basic", "unknown well-formed key bearer"),
}
SAYS = {case: detail for detail, cases in SAID.items() for case in cases}


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
@pytest.mark.parametrize("credentials", list(BAD_CREDENTIALS))
def test_request_without_a_valid_key_is_401_with_challenge(
    client, org, target, endpoint, credentials
):
    response = call(client, endpoint, target, headers=BAD_CREDENTIALS[credentials](org))
    assert_unauthorized(response)


@pytest.mark.parametrize("credentials", list(BAD_CREDENTIALS))
def test_a_401_says_whether_a_key_is_missing_not_whole_a_shown_form_or_unknown(
    client, org, credentials
):
    """Every other way (a typo, a cut key, a checksum that does not match, a key in the
    password, bytes that are not ASCII) is not a whole key."""
    response = client.get("/api/keys", headers=BAD_CREDENTIALS[credentials](org))
    assert_unauthorized(response)
    assert response.json["detail"] == SAYS.get(credentials, NOT_A_WHOLE_KEY)


def test_a_deleted_key_is_no_such_key(client, org, make_key):
    doomed = _deleted_key(client, org, make_key)
    response = client.get("/api/keys", auth=(doomed, ""))
    assert_unauthorized(response)
    assert response.json["detail"] == NO_SUCH_KEY


@pytest.mark.parametrize("app_config", [{"RATELIMIT_AUTH_FAILURES": "3/minute"}])
def test_each_401_is_one_failed_authentication_as_before(client, org):
    """Saying why costs no lookup the abuse limits would not count: a typo, a shown form and
    an unknown key are one failure each, and the fourth request from the address is 429."""
    for presented in (_truncated(org), identifier_of(org.sdk) + "...", _unknown_key(org)):
        assert client.get("/api/keys", auth=(presented, "")).status_code == 401
    blocked = client.get("/api/keys", auth=(org.sdk, ""))
    assert (blocked.status_code, blocked.json["code"]) == (429, "rate_limited")


def test_refused_request_changes_nothing(client, org, target):
    response = call(client, "delete", target, headers=basic(_unknown_key(org) + ":"))
    assert_unauthorized(response)
    assert client.get(f"/api/keys/{target}", auth=(org.sdk, "")).status_code == 200


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_deleted_key_is_401_on_every_endpoint(client, org, make_key, target, endpoint):
    doomed = make_key(kind="sdk_integration", name="doomed")
    deleted = client.delete(f"/api/keys/{identifier_of(doomed)}", auth=(org.sdk, ""))
    assert deleted.status_code == 204
    assert_unauthorized(call(client, endpoint, target, auth=(doomed, "")))


@pytest.mark.parametrize("scheme", ["basic", "bearer"])
def test_deleted_key_fails_on_the_very_next_request(client, org, make_key, scheme):
    doomed = make_key(kind="sdk_integration", name="doomed")
    headers = basic(doomed + ":") if scheme == "basic" else bearer(doomed)
    assert client.get("/api/keys", headers=headers).status_code == 200  # in use, maybe cached
    deleted = client.delete(f"/api/keys/{identifier_of(doomed)}", auth=(org.sdk, ""))
    assert deleted.status_code == 204
    assert_unauthorized(client.get("/api/keys", headers=headers))


def test_key_that_deletes_itself_fails_on_the_very_next_request(client, make_key):
    own = make_key(scopes=["monitor:read"])
    assert client.delete(f"/api/keys/{identifier_of(own)}", auth=(own, "")).status_code == 204
    assert_unauthorized(client.get("/api/keys", auth=(own, "")))


# --- 401 bodies leak nothing ----------------------------------------------------------------


def _deleted_key(client, org, make_key) -> str:
    doomed = make_key(name="doomed")
    assert client.delete(f"/api/keys/{doomed}", auth=(org.sdk, "")).status_code == 204
    return doomed


PRESENTED = {
    "unknown well-formed key": lambda client, org, make_key: _unknown_key(org),
    "bad checksum": lambda client, org, make_key: _bad_checksum(org),
    "deleted key": _deleted_key,
    "truncated key": lambda client, org, make_key: _truncated(org),
}


@pytest.mark.parametrize("scheme", ["basic", "bearer"])
@pytest.mark.parametrize("presented", list(PRESENTED))
def test_401_never_echoes_the_presented_key_or_header(client, org, make_key, presented, scheme):
    key = PRESENTED[presented](client, org, make_key)
    headers = basic(key + ":") if scheme == "basic" else bearer(key)
    header_value = headers["Authorization"]
    response = client.get("/api/keys", headers=headers)
    assert_unauthorized(response)
    exposed = response.get_data(as_text=True) + repr(list(response.headers))
    assert key not in exposed
    assert header_value not in exposed
    assert header_value.split(" ", 1)[1] not in exposed


# --- 403 for telemetry keys; sdk_integration and custom keys may manage ---------------------


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_telemetry_key_is_forbidden_on_every_management_endpoint(client, org, target, endpoint):
    response = call(client, endpoint, target, auth=(org.telemetry, ""))
    assert_problem(response, 403, "forbidden")
    assert "WWW-Authenticate" not in response.headers
    # Nothing was done: the target is still there, unchanged.
    still = client.get(f"/api/keys/{target}", auth=(org.sdk, ""))
    assert still.status_code == 200
    assert still.json["name"] == "target"


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_telemetry_key_is_forbidden_with_bearer_too(client, org, target, endpoint):
    response = call(client, endpoint, target, headers=bearer(org.telemetry))
    assert_problem(response, 403, "forbidden")


def test_minted_telemetry_key_is_forbidden(client, make_key):
    telemetry = make_key(kind="telemetry")
    assert_problem(client.get("/api/keys", auth=(telemetry, "")), 403, "forbidden")


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_sdk_integration_key_may_use_every_management_endpoint(client, org, target, endpoint):
    response = call(client, endpoint, target, auth=(org.sdk, ""))
    assert response.status_code == SUCCESS[endpoint], response.get_data(as_text=True)


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_custom_key_may_use_every_management_endpoint(client, make_key, target, endpoint):
    custom = make_key(scopes=["monitor:read", "site:read"], name="custom caller")
    response = call(client, endpoint, target, auth=(custom, ""))
    assert response.status_code == SUCCESS[endpoint], response.get_data(as_text=True)


@pytest.mark.parametrize(
    "scopes",
    [["monitor:read"], ["monitor:telemetry"], ["integration:write"]],
    ids=lambda scopes: "+".join(scopes),
)
def test_custom_key_may_list_whatever_its_scopes(client, make_key, scopes):
    custom = make_key(scopes=scopes)
    response = client.get("/api/keys", auth=(custom, ""))
    assert response.status_code == 200, response.json
