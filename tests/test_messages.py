"""Errors say what to do (issue 36): every validation message of the API, the MCP tools and
the CLI is in words a person can act on, marshmallow's defaults included (app/http/messages.py)."""

from __future__ import annotations

import re

import pytest

from app.domain.keyformat import identifier_of
from app.http.arguments import QueryInteger
from app.http.errors import flatten
from app.http.messages import PATTERNS, WORDS, plain

# What no answer may say any more: marshmallow's own words, and the bound of a number
# nobody types.
UNHELPFUL = re.compile(
    "|".join(
        [
            *map(re.escape, WORDS),
            *(pattern.pattern for pattern, _ in PATTERNS),
            "Not a valid datetime",
            str(QueryInteger.MAX),
            # marshmallow's name for a value as a whole, which a message says of its field
            "_schema",
        ]
    )
)


def refused(response, field: str) -> list[str]:
    assert response.status_code == 422, response.json
    body = response.json
    for messages in body["errors"].values():
        for message in messages:
            assert not UNHELPFUL.search(message), message
    return body["errors"][field]


def post(client, key: str, body: dict):
    return client.post("/api/keys", json=body, auth=(key, ""))


CUSTOM = {"name": "ci", "kind": "custom", "scopes": ["site:read"]}


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({**CUSTOM, "name": "   "}, "name", "Must not be empty"),
        ({**CUSTOM, "name": "x" * 201}, "name", "Too long: at most 200 characters."),
        ({"kind": "custom", "scopes": ["site:read"]}, "name", "Required: give a value."),
        ({**CUSTOM, "name": None}, "name", "Must not be null: give a value."),
        ({**CUSTOM, "name": 5}, "name", "Must be a string"),
        ({**CUSTOM, "colour": "red"}, "colour", "Not a field this request takes"),
        ({**CUSTOM, "enabled": "yes"}, "enabled", "Must be true or false."),
        ({**CUSTOM, "scopes": "site:read"}, "scopes", "Must be a JSON array"),
        ({**CUSTOM, "metadata": []}, "metadata", "Must be a JSON object"),
        ({**CUSTOM, "rate_limit": 5}, "rate_limit", "Must be a JSON object."),
        ({**CUSTOM, "quota": "day"}, "quota", "Must be a JSON object."),
        (
            {**CUSTOM, "rate_limit": {"requests": 0, "seconds": 60}},
            "rate_limit",
            "Item requests: Must be a whole number from 1 to 1000000.",
        ),
        ({**CUSTOM, "allowed_ips": ["10.0.0.1"] * 51}, "allowed_ips", "Too long: at most 50."),
        ({**CUSTOM, "expires_at": "tomorrow"}, "expires_at", "Not an ISO 8601 time"),
        (
            {**CUSTOM, "expires_at": "2999-01-01T00:00:00 01:00"},
            "expires_at",
            "in a query string a + means a space, so write it as %2B, or give the time in "
            "UTC with Z",
        ),
    ],
)
def test_a_refused_body_says_what_to_do(client, org, body, field, words):
    (message,) = refused(post(client, org.sdk, body), field)
    assert words in message


@pytest.mark.parametrize(("field", "value"), [("rate_limit", 5), ("quota", []), ("quota", "x")])
def test_a_field_that_is_not_an_object_is_said_of_the_field(client, org, field, value):
    """marshmallow files what is wrong with a nested value as a whole under `_schema`: the
    answer says it of the field, in its detail and its errors, and never says `_schema`."""
    response = post(client, org.sdk, {**CUSTOM, field: value})
    assert refused(response, field) == ["Must be a JSON object."]
    assert response.json["detail"] == f"The request is not valid: {field}."
    assert "_schema" not in response.get_data(as_text=True)


def test_an_item_that_is_not_an_object_is_named_by_its_place():
    whole = {"_schema": ["Invalid input type."]}
    assert flatten({"data": {2: whole}}) == {"data": ["Item 2: Must be a JSON object."]}
    assert flatten({"rate_limit": whole}) == {"rate_limit": ["Must be a JSON object."]}
    assert flatten(whole) == {"_schema": ["Must be a JSON object."]}  # the body as a whole


@pytest.mark.parametrize(
    ("path", "field", "words"),
    [
        ("/api/keys?page=0", "page", "Pages start at 1."),
        ("/api/keys?page=-3", "page", "Pages start at 1."),
        ("/api/keys?page=two", "page", "Must be a whole number, such as 2."),
        ("/api/keys?page=1234567890123456789", "page", "Must be a whole number"),
        ("/api/keys?page_size=0", "page_size", "A page holds from 1 to 200 items."),
        ("/api/keys?page_size=201", "page_size", "A page holds from 1 to 200 items."),
        ("/api/audit?page=0", "page", "Pages start at 1."),
        # `+01:00` sent unescaped: the query string makes it a space.
        ("/api/audit?since=2026-11-27T09:00:00+01:00", "since", "write it as %2B"),
        ("/api/keys?unused_since=2026-11-27T09:00:00+0100", "unused_since", "write it as %2B"),
        ("/api/audit?since=yesterday", "since", "2026-11-27T09:30:00Z"),
        ("/api/keys?enabled=yes", "enabled", "Must be true or false."),
        ("/api/keys?kind=custom&kind=telemetry", "kind", "give each query parameter once"),
        ("/api/audit?page=1&page=2", "page", "give each query parameter once"),
        ("/api/audit?key=x", "key", 'its shown form ending in "..."'),
        ("/api/keys/{sdk}/usage?since=2026-11-27+01:00", "since", "Has no offset: end it with Z"),
        ("/api/keys/{sdk}/usage?until=27.11.2026", "until", "Not an ISO 8601 time"),
    ],
)
def test_a_refused_query_says_what_to_do(client, org, path, field, words):
    response = client.get(path.format(sdk=identifier_of(org.sdk)), auth=(org.sdk, ""))
    (message,) = refused(response, field)
    assert words in message


def test_an_offset_sent_escaped_or_in_utc_is_taken(client, org):
    for since in ("2026-11-27T09:00:00%2B01:00", "2026-11-27T08:00:00Z"):
        assert client.get(f"/api/audit?since={since}", auth=(org.sdk, "")).status_code == 200


def test_other_endpoints_say_what_to_do_too(client, org):
    revoke = client.post("/api/revoke", json={"keys": []})
    assert refused(revoke, "keys") == ["Must have from 1 to 100."]
    introspect = client.post(
        "/api/introspect", json={"token": org.sdk, "client_ip": "here"}, auth=(org.sdk, "")
    )
    assert refused(introspect, "client_ip") == [
        "Must be an IPv4 or IPv6 address, such as 203.0.113.7."
    ]


def test_the_cli_says_the_same(runner, org):
    result = runner.invoke(
        args=["keys", "create", "--org", "acme", "--kind", "custom", "--name", " "]
    )
    assert result.exit_code == 1
    assert "name: Must not be empty" in result.output
    late = runner.invoke(args=["audit", "export", "--org", "acme", "--since", "now"])
    assert "Not an ISO 8601 time" in late.output


def test_a_message_without_words_of_its_own_is_kept():
    assert plain("Must be in the future.") == "Must be in the future."
    assert plain("Longer than maximum length 7.") == "Too long: at most 7."
