"""GET /openapi.json and GET /docs: the OpenAPI 3.1 document matches the routes and is
valid; the interactive reference works with no internet and no credentials."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from marshmallow import ValidationError
from openapi_spec_validator import validate
from openapi_spec_validator.validation import OpenAPIV31SpecValidator

from app.domain.scopes import KINDS, MANAGING_KINDS
from app.http.errors import CODES
from app.http.operations import ANY_REQUEST, ERROR_MEANINGS, PROBLEM_CODES, Operation, documented
from app.keys import schemas
from app.openapi import document as openapi

IGNORED_METHODS = {"HEAD", "OPTIONS"}
# The endpoints that serve the document and its viewer, the page for people (a client
# of the API) and Prometheus's text at /metrics (docs/metrics.md) are not part of the API.
NOT_THE_API = {
    "static",
    "docs.document",
    "docs.page",
    "docs.start",
    "docs.asset",
    "page.page",
    "page.static",
    "metrics.metrics",
}
METHODS = {"get", "put", "post", "delete", "patch"}


def routes(app) -> set[tuple[str, str]]:
    """(path as OpenAPI writes it, method) of every route of the url_map."""
    found = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint in NOT_THE_API:
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)  # `<path:x>` too
        found |= {(path, method) for method in rule.methods - IGNORED_METHODS}
    return found


def operations(document: dict) -> set[tuple[str, str]]:
    return {
        (path, method.upper())
        for path, item in document["paths"].items()
        for method in item
        if method in METHODS
    }


@pytest.fixture
def document(client) -> dict:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    return response.json


def test_the_document_describes_every_route_and_nothing_else(app, document):
    assert routes(app) == operations(document)
    assert ("/api/keys/{reference}", "DELETE") in routes(app)
    assert ("/healthz", "GET") in routes(app)


def test_a_route_the_document_does_not_describe_stops_the_document(make_app):
    app = make_app()
    app.add_url_rule("/api/extra", "extra", lambda: "")
    with pytest.raises(KeyError, match="extra"):
        openapi.build(app)


def test_a_route_is_documented_by_the_operation_its_view_carries(make_app):
    """A new endpoint is written in one place: its view, with its operation beside it."""
    app = make_app()
    answer = Operation("Extra", "Nothing.", 200, "Done.", ANY_REQUEST, secured=False)
    app.add_url_rule("/api/extra/<name>", "extra", documented(answer)(lambda name: ""))
    extra = openapi.build(app)["paths"]["/api/extra/{name}"]["get"]
    assert extra["operationId"] == "extra"
    assert (extra["summary"], extra["security"]) == ("Extra", [])
    assert {"200", "400", "503"} <= set(extra["responses"])
    assert [parameter["name"] for parameter in extra["parameters"]] == ["name"]


def test_the_document_is_valid_openapi_3_1(document):
    assert document["openapi"].startswith("3.1.")
    validate(document, cls=OpenAPIV31SpecValidator)


def test_the_document_is_served_without_credentials_and_built_once(app, client):
    first = client.get("/openapi.json")
    assert first.status_code == 200
    assert first.mimetype == "application/json"
    assert first.headers["Cache-Control"] == "no-cache"
    assert openapi.text(app) is openapi.text(app)
    again = client.get("/openapi.json", headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304


def test_the_document_is_not_behind_the_keys_limits(make_app):
    app = make_app(RATELIMIT_AUTH_FAILURES="1/minute")
    client = app.test_client()
    assert client.get("/api/keys").status_code == 401
    assert client.get("/api/keys").status_code == 429
    assert client.get("/openapi.json").status_code == 200
    assert client.get("/docs").status_code == 200


def test_bodies_and_list_parameters_come_from_the_marshmallow_schemas(document):
    keys = document["paths"]["/api/keys"]
    create = keys["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert create == {"$ref": "#/components/schemas/CreateKey"}
    schemas = document["components"]["schemas"]
    assert schemas["CreateKey"]["required"] == ["kind", "name"]
    assert schemas["CreateKey"]["properties"]["name"]["maxLength"] == 200
    assert schemas["CreateKey"]["additionalProperties"] is False
    assert {p["name"] for p in keys["get"]["parameters"]} == {
        "page",
        "page_size",
        "kind",
        "state",
        "unused_since",
        "enabled",
        "metadata",
        "outside_policy",
        "identity",
    }
    # `metadata[name]=value`: OpenAPI's deepObject, as generated clients send a dict
    metadata = next(p for p in keys["get"]["parameters"] if p["name"] == "metadata")
    assert (metadata["style"], metadata["explode"]) == ("deepObject", True)
    assert metadata["schema"]["type"] == "object"
    page_size = next(p for p in keys["get"]["parameters"] if p["name"] == "page_size")
    assert page_size["schema"] == {"type": "integer", "default": 50, "minimum": 1, "maximum": 200}
    page = next(p for p in keys["get"]["parameters"] if p["name"] == "page")
    assert page["schema"]["maximum"] == 10**18 - 1  # the 18 digits the service reads
    assert schemas["KeyOutput"]["properties"]["last_used"]["type"] == ["string", "null"]


def test_every_error_is_a_plain_problem_naming_its_status_and_codes(document):
    """The plain Problem schema on every error (a schema narrowed per status with allOf and
    a const is one that openapi-python-client cannot type); status and codes in words."""
    responses = document["components"]["responses"]
    for status in ERROR_MEANINGS:
        response = responses[CODES[status]]
        [(media_type, content)] = response["content"].items()
        assert media_type == "application/problem+json"
        assert content["schema"] == {"$ref": "#/components/schemas/Problem"}
        code = PROBLEM_CODES.get(status, (CODES[status],))[0]
        assert f"`status` {status}, `code` `{code}`" in response["description"]
    assert "Retry-After" in responses["rate_limited"]["headers"]
    assert "Retry-After" in responses["unavailable"]["headers"]
    assert "WWW-Authenticate" in responses["unauthorized"]["headers"]
    assert responses["forbidden"]["description"].endswith(
        "`status` 403, `code` `forbidden` or `scope_exceeds_caller` or `exceeds_caller` or "
        "`organization_policy` or `ip_not_allowed`."
    )
    # docs/design.md, "Key policy": the policy's refusals, and the headers of a key's own limit
    assert "`disabled_key`" in responses["unauthorized"]["description"]
    assert "`already_rotated`" in responses["conflict"]["description"]
    assert {"RateLimit", "RateLimit-Policy"} <= set(responses["rate_limited"]["headers"])
    assert "`quota_exceeded`" in responses["rate_limited"]["description"]
    assert {"Quota-Remaining", "Quota-Reset"} <= set(responses["rate_limited"]["headers"])
    # docs/design.md, "Organization policy"
    assert "`key_limit_reached`" in responses["conflict"]["description"]


def test_checks_document_the_policy_they_pass_on(document):
    """Forward auth's 204 headers and introspection's answer (docs/design.md, "Key policy")."""
    headers = document["paths"]["/api/forward-auth"]["get"]["responses"]["204"]["headers"]
    assert {"X-Api-Key-Metadata", "RateLimit", "RateLimit-Policy"} <= set(headers)
    assert {"Quota-Remaining", "Quota-Reset"} <= set(headers)
    introspected = document["paths"]["/api/introspect"]["post"]["responses"]["200"]
    schema = introspected["content"]["application/json"]["schema"]
    answer = (
        schema.get("properties")
        or document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]["properties"]
    )
    assert {"code", "retry_after", "metadata", "quota_remaining"} <= set(answer)
    assert answer["code"]["enum"] == [
        "expired_key",
        "disabled_key",
        "ip_not_allowed",
        "rate_limited",
        "quota_exceeded",
    ]


def test_request_models_hold_only_what_a_client_may_set(document):
    """No read-only field in a request schema (a generated client would offer each as an
    untyped argument); that they are accepted and ignored is said in words."""
    components = document["components"]["schemas"]
    for name in ("CreateKey", "UpdateKey", "RotateKey"):
        assert not set(components[name]["properties"]) & schemas.READ_ONLY, name
        assert components[name]["additionalProperties"] is False
    for name in ("CreateKey", "UpdateKey"):
        assert "are accepted and ignored" in components[name]["description"]
    update = components["UpdateKey"]
    assert "anyOf" not in update
    assert update["description"].startswith(
        "At least one of `allowed_ips`, `enabled`, `expires_at`, `identity`, `metadata`, "
        "`name`, `quota`, `rate_limit`, `scopes`"
    )


def test_the_document_names_its_server_and_license(document):
    assert document["servers"] == [{"url": "/", "description": "This service"}]
    assert document["info"]["license"] == {"name": "MIT", "identifier": "MIT"}


@pytest.mark.parametrize(
    ("path", "method", "statuses"),
    [
        ("/api/keys", "get", {"200", "401", "403", "422", "429", "500", "503"}),
        ("/api/keys", "post", {"201", "400", "401", "403", "413", "415", "422", "429"}),
        ("/api/keys/{reference}", "get", {"200", "401", "403", "404", "429"}),
        ("/api/keys/{reference}", "put", {"200", "404", "409", "413", "415", "422"}),
        ("/api/keys/{reference}", "delete", {"204", "401", "403", "404", "429"}),
        ("/healthz", "get", {"200", "503"}),
    ],
)
def test_each_operation_lists_the_statuses_it_can_answer(document, path, method, statuses):
    assert statuses <= set(document["paths"][path][method]["responses"])


def test_operations_name_the_keys_they_need(document):
    schemes = document["components"]["securitySchemes"]
    assert schemes["basicAuth"] == {**schemes["basicAuth"], "type": "http", "scheme": "basic"}
    assert schemes["bearerAuth"] == {**schemes["bearerAuth"], "type": "http", "scheme": "bearer"}
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if path == "/healthz":
                assert operation["security"] == []
                continue
            if path == "/mcp":  # Bearer, sdk_integration keys only
                assert operation["security"] == [{"bearerAuth": ["sdk_integration"]}]
                continue
            if path == "/api/revoke":  # holding a key is the right
                assert operation["security"] == []
                continue
            if path.startswith("/api/identities") and method == "get":  # a key of one: its own
                roles = {role for need in operation["security"] for [role] in need.values()}
                assert roles == set(MANAGING_KINDS), (path, method)
                assert "belongs to an identity" in operation["description"]
                assert "any other key gets 403" in operation["description"]
                continue
            if path.startswith(("/api/webhooks", "/api/identities")):  # sections 22, 23
                roles = {role for need in operation["security"] for [role] in need.values()}
                assert roles == {"sdk_integration"}, (path, method)
                assert "any other key gets 403" in operation["description"]
                continue
            if path == "/api/forward-auth":  # any kind of key
                roles = {role for need in operation["security"] for [role] in need.values()}
                assert roles == set(KINDS), (path, method)
                continue
            if path == "/api/keys/import":  # sdk_integration keys
                roles = {role for need in operation["security"] for [role] in need.values()}
                assert roles == {"sdk_integration"}, (path, method)
                assert "any other: 403" in operation["description"]
                continue
            if path == "/api/organization":  # sdk_integration keys
                roles = {role for need in operation["security"] for [role] in need.values()}
                assert roles == {"sdk_integration"}, (path, method)
                assert "telemetry key gets 403" in operation["description"]
                continue
            assert {role for need in operation["security"] for [role] in need.values()} == {
                "sdk_integration",
                "custom",
            }, (path, method)
            assert "telemetry key gets 403" in operation["description"]
    create = document["paths"]["/api/keys"]["post"]
    assert "scope_exceeds_caller" in create["description"]


class References(HTMLParser):
    """The scripts and stylesheets a page loads, and its inline scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str]] = []
        self.inline_scripts = 0
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "script":
            if "src" in attributes:
                self.urls.append(("script", attributes["src"]))
            else:
                self._in_script = True
        elif tag == "link":
            self.urls.append((attributes["rel"], attributes["href"]))

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline_scripts += 1

    def handle_endtag(self, tag):
        self._in_script = False


CONTENT_TYPES = {
    "script": {"text/javascript", "application/javascript"},
    "stylesheet": {"text/css"},
    "icon": {"image/png"},
}


def test_docs_page_loads_only_what_the_service_itself_serves(client):
    page = client.get("/docs")
    assert page.status_code == 200
    assert page.mimetype == "text/html"
    assert page.headers["Cache-Control"] == "no-cache"
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'self';" in policy
    html = page.get_data(as_text=True)
    assert "ak_" not in html and "Authorization" not in html
    references = References()
    references.feed(html)
    assert references.inline_scripts == 0  # the policy allows none
    kinds = {kind for kind, _ in references.urls}
    assert {"script", "stylesheet"} <= kinds
    for kind, url in references.urls:
        assert "//" not in url and not url.startswith("/"), url  # relative, this service
        with client.get(f"/{url}") as response:
            assert response.status_code == 200, url
            assert response.mimetype in CONTENT_TYPES[kind], (url, response.mimetype)
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            assert response.get_data()


def test_docs_start_script_reads_the_document_of_this_service(client):
    script = client.get("/docs/start.js").get_data(as_text=True)
    assert 'url: "openapi.json"' in script
    assert "validatorUrl: null" in script  # no document sent to an outside validator


def test_swagger_ui_files_are_cached_for_a_day(client):
    with client.get("/docs/swagger-ui-bundle.js") as response:
        assert response.status_code == 200
        assert set(response.headers["Cache-Control"].split(", ")) == {"public", "max-age=86400"}
        assert b"SwaggerUIBundle" in response.get_data()


@pytest.mark.parametrize("name", ["VERSION", "LICENSE", "oauth2-redirect.html", "..%2fdocs.py"])
def test_docs_serves_no_other_file(client, name):
    response = client.get(f"/docs/{name}")
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"


def test_the_documented_name_pattern_is_the_rule_the_service_applies(document):
    """Every character of the first 12,544 (all of Python's white space among them), alone
    and inside a name: the pattern matches exactly the names the create schema takes."""
    pattern = re.compile(
        document["components"]["schemas"]["CreateKey"]["properties"]["name"]["pattern"]
    )
    disagreements = []
    for code in [*range(0x3100), 0xFEFF]:
        for name in (chr(code), f"a{chr(code)}b"):
            try:
                schemas.create_key.load({"name": name, "kind": "telemetry"})
                taken = True
            except ValidationError:
                taken = False
            if taken != bool(pattern.search(name)):
                disagreements.append(name)
    assert disagreements == []
