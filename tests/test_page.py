"""GET / and its files (docs/design.md, "The page"): what the server sends, seen over HTTP. The
page's behaviour in a browser is tested in tests/server/test_page.py."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

from app.domain import keyformat
from app.domain.periods import PERIODS
from app.domain.scopes import FIXED, KINDS, to_names
from app.keys.schemas import MAX_GRACE_SECONDS
from app.quotas.schemas import MAX_QUOTA_REQUESTS

FILES = {"page/page.js": "text/javascript", "page/page.css": "text/css"}


class Markup(HTMLParser):
    """The elements of a page, with their attributes, and the text of its scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self.options: dict[str, list[dict[str, str | None]]] = {}  # by their select's id
        self._in_script = False
        self._select = ""

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if tag == "select":
            self._select = dict(attrs)["id"]
        elif tag == "option":
            self.options.setdefault(self._select, []).append(dict(attrs))

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_text += data


def parsed(response) -> Markup:
    markup = Markup()
    markup.feed(response.get_data(as_text=True))
    return markup


def policy(response) -> dict[str, list[str]]:
    directives = {}
    for directive in response.headers["Content-Security-Policy"].split(";"):
        name, *values = directive.split()
        directives[name] = values
    return directives


def test_the_page_is_served_without_a_key(client):
    response = client.get("/")
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    assert "Set-Cookie" not in response.headers
    assert response.headers["Cache-Control"] == "no-cache"
    again = client.get("/", headers={"If-None-Match": response.headers["ETag"]})
    assert again.status_code == 304


@pytest.mark.parametrize("path", ["/", *FILES])
def test_the_page_and_its_files_carry_the_security_headers(client, path):
    with client.get(path if path == "/" else "/" + path) as response:
        assert response.status_code == 200
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    directives = policy(response)
    assert directives["default-src"] == ["'none'"]
    assert directives["script-src"] == ["'self'"]  # no unsafe-inline, no unsafe-eval
    assert directives["style-src"] == ["'self'"]
    assert directives["connect-src"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["form-action"] == ["'none'"]
    assert directives["require-trusted-types-for"] == ["'script'"]


@pytest.mark.parametrize(("path", "mimetype"), FILES.items())
def test_the_files_are_the_packages_own(client, path, mimetype):
    with client.get("/" + path) as response:
        assert response.mimetype == mimetype
        assert response.headers["Cache-Control"] == "no-cache"


def test_a_file_that_is_not_there_is_a_problem_404(client):
    response = client.get("/page/nothing.js")
    assert response.status_code == 404
    assert response.json["code"] == "not_found"


def test_the_page_runs_no_inline_script_and_loads_only_its_own_files(client):
    markup = parsed(client.get("/"))
    assert markup.script_text.strip() == ""
    loaded = []
    for tag, attrs in markup.elements:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        assert "style" not in attrs and tag != "style", (tag, attrs)
        loaded += [attrs[name] for name in ("src", "href") if attrs.get(name)]
    assert sorted(loaded) == ["page/icon.svg", "page/page.css", "page/page.js"]
    for path in loaded:  # relative: this origin, under any path prefix of a proxy
        with client.get("/" + path) as response:
            assert response.status_code == 200


def test_no_form_field_has_a_name_that_a_submission_would_carry(client):
    """Were the script ever not to handle a form, nothing typed would reach a URL."""
    markup = parsed(client.get("/"))
    fields = [attrs for tag, attrs in markup.elements if tag in {"input", "select"}]
    assert fields
    assert all("name" not in attrs for attrs in fields)
    [key] = [attrs for attrs in fields if attrs.get("id") == "api-key"]
    assert key["type"] == "password"


def test_kinds_fixed_scopes_the_key_format_and_the_grace_limit_come_from_the_service(client):
    markup = parsed(client.get("/"))
    [body] = [attrs for tag, attrs in markup.elements if tag == "body"]
    assert body["data-tail-length"] == str(keyformat.TAIL_LENGTH)
    [grace] = [attrs for tag, attrs in markup.elements if attrs.get("id") == "rotate-grace"]
    assert (grace["type"], grace["min"], grace["max"]) == ("number", "0", str(MAX_GRACE_SECONDS))
    # A quota's figure and periods, as app/quotas/schemas.py and app/domain/periods.py have them.
    for which, least in (("key-quota-requests", "1"), ("grant-uses", "0")):
        [uses] = [attrs for tag, attrs in markup.elements if attrs.get("id") == which]
        assert (uses["type"], uses["min"], uses["max"]) == (
            "number",
            least,
            str(MAX_QUOTA_REQUESTS),
        )
    assert [attrs["value"] for attrs in markup.options["key-quota-period"]] == list(PERIODS)
    filtered = [attrs["value"] for attrs in markup.options["filter-kind"]]
    assert filtered == ["", *KINDS]
    offered = {attrs["value"]: attrs.get("data-scopes") for attrs in markup.options["key-kind"]}
    assert list(offered) == list(KINDS)
    for kind in KINDS:
        expected = " ".join(to_names(FIXED[kind])) if kind in FIXED else None
        assert offered[kind] == expected


def test_the_page_is_no_part_of_the_api_document(client):
    paths = client.get("/openapi.json").json["paths"]
    assert "/" not in paths
    assert not any(path.startswith("/page") for path in paths)


def test_every_audit_action_has_words_and_keeps_its_code_in_the_filter(client):
    from app.audit import ACTIONS
    from app.page import ACTION_WORDS

    assert set(ACTION_WORDS) == set(ACTIONS)
    markup = Markup()
    markup.feed(client.get("/").get_data(as_text=True))
    options = markup.options["audit-action"][1:]
    assert [(o["value"], o["data-words"]) for o in options] == [
        (action, ACTION_WORDS[action]) for action in ACTIONS
    ]


def test_every_webhook_event_has_words_written_into_the_page(client):
    from app.audit.outbox import EVENT_TYPES
    from app.page import EVENT_WORDS

    assert set(EVENT_WORDS) == set(EVENT_TYPES)
    page = client.get("/").get_data(as_text=True)
    written = re.findall(r'<data value="([\w.]+)">([^<]+)</data>', page)
    assert [(event, html.unescape(words)) for event, words in written] == [
        (event, EVENT_WORDS[event]) for event in EVENT_TYPES
    ]
