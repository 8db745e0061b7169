"""The page at / in a real Chromium, on a real gunicorn (docs/design.md, "The page"): a
person manages the keys with nothing but a key, finding every control by its role and
accessible name, with the mouse or the keyboard alone, from 360 to 1400 px wide, every view
passing axe-core's WCAG 2 A and AA rules.

Every test also checks, when its tab closes, that no request left the origin, that no key
travelled in a URL or a cookie, and that the console showed no error but the refusals
the test provoked (Chromium logs every 4xx answer of fetch()). The run takes the README's
screenshots on the way: into docs/screenshots/ with `make screenshots` (SCREENSHOTS=docs/
screenshots), into a temporary folder otherwise, so a test run leaves the checkout as it was.

Debian's chromium package (/usr/bin/chromium, or $CHROMIUM) driven by Playwright; the
tests skip, saying so, where it is not installed (.ci/run installs it).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from app.access import policy
from app.domain.keyformat import new_key
from app.page import ACTION_WORDS, EVENT_WORDS
from tests.processes import PROJECT
from tests.server.conftest import Org, Server, serving

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is a dev dependency: make install"
)
Page, expect = sync_api.Page, sync_api.expect
# How long an action or an expectation waits for the page: a bound that tells a page that
# never gets there from a slow one, not a target (Playwright's 5 s failed on a loaded machine).
WAIT_MS = 15_000
expect.set_options(timeout=WAIT_MS)

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason=f"no Chromium at {CHROMIUM}: apt-get install chromium chromium-driver "
    "(.ci/run does), or set CHROMIUM to its path",
)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WIDE = {"width": 1400, "height": 900}
NARROW = {"width": 390, "height": 844}
# Far from UTC, and not by whole hours: a time shown in UTC cannot pass for local.
ZONE, OFFSET = "Asia/Kathmandu", timezone(timedelta(hours=5, minutes=45))
XSS = "<img src=x onerror=alert(1)>"
FULL_KEY = re.compile(r"ak_[A-Za-z0-9]{50}")
PAGE_STATUS = re.compile(r"^Page \d+ of \d+ · ")
REFUSED = re.compile(r"the server responded with a status of (\d{3})")


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    folder = os.environ.get("SCREENSHOTS")
    return PROJECT / folder if folder else tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    # Counts written every half second: a use shows in a key's usage within a second.
    # Webhooks to a receiver on this machine (WEBHOOK_ALLOW_PRIVATE), looked for 5 times a
    # second.
    env = {
        "USAGE_FLUSH_SECONDS": "0.5",
        "WEBHOOK_ALLOW_PRIVATE": "true",
        "WEBHOOK_POLL_SECONDS": "0.2",
    }
    with serving(tmp_path_factory, "page", 2, env) as server:
        yield server


@pytest.fixture
def org(server_org: Org) -> Org:
    """Each test's organization: one of its own on the module's server."""
    return server_org


@pytest.fixture(scope="session")
def browser() -> Iterator:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@dataclass
class Tab:
    """A page in a browser context of its own, and what it did."""

    page: Page
    origin: str
    refusals: set[int] = field(default_factory=set)  # statuses the test provokes
    urls: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    bearer: set[str] = field(default_factory=set)

    def expect_refusal(self, *statuses: int) -> None:
        """The test provokes these statuses: Chromium logs them, and that is no fault."""
        self.refusals.update(statuses)

    def check(self) -> None:
        assert self.outside == [], "requests left the origin"
        assert self.page_errors == []
        assert self.dialogs == [], "the page opened a JavaScript dialog"
        for message in self.console_errors:
            refused = REFUSED.search(message)
            assert refused and int(refused.group(1)) in self.refusals, message
        for url in self.urls:
            assert not FULL_KEY.search(url), url
        assert self.page.context.cookies() == []
        storage = self.page.evaluate("() => [document.cookie, localStorage.length]")
        assert storage == ["", 0]


@pytest.fixture
def tab(browser, server) -> Iterator[Tab]:
    origin = f"http://127.0.0.1:{server.port}"
    context = browser.new_context(viewport=WIDE, timezone_id=ZONE, locale="en-GB", base_url=origin)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    tab = Tab(page, origin)

    def on_request(request) -> None:
        tab.urls.append(request.url)
        if request.url.startswith(origin + "/api/"):
            tab.bearer.add(request.headers.get("authorization", ""))

    # What would go to the network, elsewhere (a request the page's policy refused, which
    # Chromium reports without sending it, never gets here).
    def refuse_outside(route) -> None:
        tab.outside.append(route.request.url)
        route.abort()

    page.on("request", on_request)
    context.route(lambda url: not url.startswith(origin + "/"), refuse_outside)
    page.on("console", lambda m: m.type == "error" and tab.console_errors.append(m.text))
    page.on("pageerror", lambda error: tab.page_errors.append(str(error)))
    page.on("dialog", lambda dialog: (tab.dialogs.append(dialog.message), dialog.dismiss()))
    page.goto("/")
    yield tab
    try:
        tab.check()
    finally:
        context.close()


# --- what a person does ---------------------------------------------------------------------


def use_key(page: Page, key: str) -> None:
    page.get_by_label("API key", exact=True).fill(key)
    page.get_by_role("button", name="Use key").click()
    expect(page.get_by_role("heading", name="Keys of your organization")).to_be_visible()
    expect(page.get_by_text(PAGE_STATUS)).to_be_visible()  # the list is in
    # and its usage reads, which would otherwise meet what the test changes next (a 401 of a
    # key deleted meanwhile sends the person back to the key input)
    expect(page.locator("#rows [aria-busy=true]")).to_have_count(0)


def row(page: Page, name: str):
    """The table row of the key with this name."""
    return page.get_by_role("row").filter(has=page.get_by_text(name, exact=True))


def names_listed(page: Page) -> list[str]:
    return page.locator("#rows .key-name").all_text_contents()


def dialog(page: Page, title: str):
    return page.get_by_role("dialog", name=title)


def scope_boxes(form):
    """The scope checkboxes of a create or edit dialog (Enabled is a checkbox too)."""
    return form.get_by_role("group", name="Scopes").get_by_role("checkbox")


def make_key(server: Server, key: str, name: str, scopes=("monitor:read",), kind="custom", **more):
    body = {"name": name, "kind": kind, **more}
    if kind == "custom":
        body["scopes"] = list(scopes)
    answer = server.request("POST", "/api/keys", key, body)
    assert answer.status == 201, answer.body
    return answer.json()


def cell(page: Page, name: str, column: str):
    """The cells of column `column` (by its header) in the rows of the key named `name`."""
    headers = page.get_by_role("columnheader").all_text_contents()
    return row(page, name).locator(f":scope > td:nth-child({headers.index(column) + 1})")


def close_new_key(page: Page) -> None:
    """Done, and yes: a new key not copied is closed only when the person says so."""
    shown = page.get_by_role("dialog", name=re.compile(r"^Key (created|rotated)$"))
    shown.get_by_role("button", name="Done").click()
    shown.get_by_role("button", name="Close", exact=True).click()
    expect(shown).to_be_hidden()


def screenshot(page: Page, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=folder / f"{name}.png", animations="disabled")


def in_seconds(seconds: float) -> str:
    """A time `seconds` from now, as the API takes it."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def identifier(full: str) -> str:
    return full[:-38]


def read_key(server: Server, key: str, reference: str) -> dict:
    """The key named by `reference` (not its full value: that is no URL's business), as
    the API shows it to `key`."""
    answer = server.request("GET", f"/api/keys/{reference}", key)
    assert answer.status == 200, answer.body
    return answer.json()


def shown_time(iso: str) -> str:
    """HH:MM of a time as a person in ZONE reads it (en-GB: 24-hour clock)."""
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(OFFSET)
    return moment.strftime("%H:%M")


# --- the tests -------------------------------------------------------------------------------


def test_a_key_shows_its_organizations_keys_and_stays_in_this_tab_only(tab, server, org):
    page = tab.page
    expect(page.get_by_label("API key", exact=True)).to_be_focused()
    expect(page.get_by_label("API key", exact=True)).to_have_attribute("type", "password")
    use_key(page, org.sdk)

    table = page.get_by_role("table", name="Keys of your organization")
    headers = table.get_by_role("columnheader").all_text_contents()
    assert headers[:6] == ["Name", "Kind", "Scopes", "Created", "Last used", "Expires"]
    assert names_listed(page) == ["Telemetry", "SDK Integration"]
    sdk = row(page, "SDK Integration")
    expect(cell(page, "SDK Integration", "Kind")).to_have_text("sdk_integration")
    expect(row(page, "Telemetry").get_by_role("listitem")).to_have_text(["monitor:telemetry"])
    expect(cell(page, "Telemetry", "Last used")).to_have_text("Never")
    expect(cell(page, "SDK Integration", "Expires")).to_have_text("Never")
    # Last used, in the person's own time zone.
    [me] = [
        k
        for k in server.request("GET", "/api/keys", org.sdk).json()["data"]
        if k["kind"] == "sdk_integration"
    ]
    expect(cell(page, "SDK Integration", "Last used")).to_contain_text(shown_time(me["last_used"]))
    expect(sdk).to_contain_text("this key")
    expect(page.get_by_text("Page 1 of 1 · 2 keys")).to_be_visible()

    # The key: in sessionStorage, nowhere else (not even in the page), sent as a header.
    stored = page.evaluate("() => Object.entries(sessionStorage)")
    assert stored == [["apiKey", org.sdk]]
    assert org.sdk not in page.content()
    assert tab.bearer == {f"Bearer {org.sdk}"}
    # A reload of the tab keeps it; another tab (context) never had it.
    page.reload()
    expect(page.get_by_role("heading", name="Keys of your organization")).to_be_visible()
    other = page.context.browser.new_context(base_url=tab.origin).new_page()
    other.goto("/")
    expect(other.get_by_label("API key", exact=True)).to_be_visible()
    assert other.evaluate("() => sessionStorage.length") == 0
    other.context.close()

    page.get_by_role("button", name="Forget key").click()
    expect(page.get_by_label("API key", exact=True)).to_be_focused()
    assert page.evaluate("() => sessionStorage.length") == 0


def test_create_shows_the_full_key_once_with_a_copy_button(tab, server, org, screenshots):
    page = tab.page
    use_key(page, org.sdk)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    form.get_by_label("Name", exact=True).fill("CI deploys (production)")
    expect(form.get_by_label("Kind", exact=True)).to_have_value("custom")
    boxes = scope_boxes(form)
    expect(boxes).to_have_count(11)  # an sdk_integration key holds every scope
    form.get_by_role("checkbox", name="monitor:read", exact=True).check()
    form.get_by_role("checkbox", name="monitor:write", exact=True).check()
    # (ICU still spells Kathmandu the old way.)
    expect(form).to_contain_text(re.compile(r"In your time zone \(Asia/Kath?mandu\)"))
    form.get_by_label("Expires", exact=True).fill("2030-01-02T08:49")  # Kathmandu: 03:04 UTC
    form.get_by_role("button", name="Create").click()

    created = dialog(page, "Key created")
    shown = created.get_by_role("textbox", name="New key")
    expect(shown).to_have_value(FULL_KEY)
    expect(shown).to_have_attribute("readonly", "")
    expect(created).to_contain_text("it will not be shown again")
    full = shown.input_value()
    created.get_by_role("button", name="Copy").click()
    expect(created.get_by_role("status")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("() => navigator.clipboard.readText()") == full
    screenshot(page, screenshots, "create")

    created.get_by_role("button", name="Done").click()
    expect(created).to_be_hidden()
    assert full not in page.content()  # shown once: gone from the page
    expect(page.get_by_role("button", name="New key")).to_be_focused()
    new = row(page, "CI deploys (production)")
    expect(new.get_by_role("listitem")).to_have_text(["monitor:read", "monitor:write"])
    expect(new).to_contain_text(identifier(full) + "...")
    expect(cell(page, "CI deploys (production)", "Expires")).to_contain_text("2 Jan 2030, 08:49")
    # The key works, with the scopes and expiry chosen.
    mine = read_key(server, full, identifier(full))
    assert (mine["kind"], mine["scopes"]) == ("custom", ["monitor:read", "monitor:write"])
    assert mine["expires_at"] == "2030-01-02T03:04:00.000000Z"

    # A fixed kind: its scopes are said, not offered.
    page.get_by_role("button", name="New key").click()
    form.get_by_label("Kind", exact=True).select_option("telemetry")
    expect(scope_boxes(form)).to_have_count(0)
    expect(form).to_contain_text("The scopes of a telemetry key are fixed: monitor:telemetry.")
    form.get_by_label("Name", exact=True).fill("Status page monitor")
    expect(form.get_by_label("Expires", exact=True)).to_have_value("")
    form.get_by_role("button", name="Create").click()
    expect(dialog(page, "Key created").get_by_role("textbox", name="New key")).to_have_value(
        FULL_KEY
    )
    close_new_key(page)
    expect(cell(page, "Status page monitor", "Kind")).to_have_text("telemetry")
    screenshot(page, screenshots, "list")


def test_the_organizations_policy_says_in_words_what_it_refused(tab, server, org):
    """Organization policy (docs/design.md): an expiry beyond the organization's lifetime, then a
    key past its max_keys, each refused with a sentence naming the rule and its bound."""
    server.flask("org", "policy", org.name, "--max-key-lifetime-days", "30", "--max-keys", "3")
    page = tab.page
    use_key(page, org.sdk)
    tab.expect_refusal(403, 409)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    form.get_by_label("Name", exact=True).fill("Too long")
    form.get_by_role("checkbox", name="monitor:read", exact=True).check()
    form.get_by_label("Expires").fill("2030-01-02T08:49")
    form.get_by_role("button", name="Create").click()
    said = (
        r"The organization's policy \(max_key_lifetime_days\) lets a key live at most 30 "
        r"days: it must expire no later than \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\."
    )
    expect(form.get_by_role("alert")).to_have_text(re.compile(f"^{said}$"))
    # The input it concerns points at it, before its own hint.
    expect(form.get_by_label("Expires")).to_have_attribute("aria-invalid", "true")
    expect(form.get_by_label("Expires")).to_have_accessible_description(re.compile(f"^{said} "))
    form.get_by_label("Expires").fill("")  # the longest allowed
    form.get_by_role("button", name="Create").click()
    close_new_key(page)
    page.get_by_role("button", name="New key").click()
    form.get_by_label("Name", exact=True).fill("One too many")
    form.get_by_role("checkbox", name="monitor:read", exact=True).check()
    form.get_by_role("button", name="Create").click()
    expect(form.get_by_role("alert")).to_have_text(
        "The organization's policy (max_keys) allows at most 3 keys, and it holds 3: delete "
        "a key before making another."
    )
    page.get_by_role("button", name="Cancel").click()
    assert names_listed(page) == ["Telemetry", "SDK Integration", "Too long"]


def test_refusals_show_in_the_dialog_that_asked(tab, server, org, screenshots):
    narrow = make_key(server, org.sdk, "Monitors only", ["monitor:read", "monitor:write"])
    page = tab.page
    use_key(page, narrow["key"])
    tab.expect_refusal(422)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    # Only the scopes the key in use holds are offered.
    boxes = scope_boxes(form)
    expect(boxes).to_have_count(2)
    assert [box.get_attribute("value") for box in boxes.all()] == ["monitor:read", "monitor:write"]

    # The API, not the page, decides what is valid: a blank name is its 422.
    form.get_by_label("Name", exact=True).fill("   ")
    form.get_by_role("checkbox", name="monitor:read").check()
    form.get_by_role("button", name="Create").click()
    error = form.get_by_role("alert")
    expect(error).to_have_text("The request is not valid: Name.")
    expect(form.get_by_label("Name", exact=True)).to_have_accessible_description(
        "Name: Must not be empty (white space alone is empty)."
    )
    screenshot(page, screenshots, "error")
    page.get_by_role("button", name="Cancel").click()
    assert names_listed(page) == ["Telemetry", "SDK Integration", "Monitors only"]

    # The key in use gives up a scope: the page offers only what it still holds.
    row(page, "Monitors only").get_by_role("button", name="Edit").click()
    edit = dialog(page, "Edit key")
    edit.get_by_role("checkbox", name="monitor:write").uncheck()
    edit.get_by_role("button", name="Save").click()
    expect(row(page, "Monitors only").get_by_role("listitem")).to_have_text(["monitor:read"])
    page.get_by_role("button", name="New key").click()
    expect(scope_boxes(form)).to_have_count(1)


def test_edit_offers_the_same_inputs_and_saves(tab, server, org, screenshots):
    make_key(server, org.sdk, "Deploys", ["monitor:read"])
    page = tab.page
    use_key(page, org.sdk)
    row(page, "Deploys").get_by_role("button", name="Edit").click()
    form = dialog(page, "Edit key")
    expect(form.get_by_label("Name", exact=True)).to_have_value("Deploys")
    expect(form.get_by_label("Kind", exact=True)).to_be_hidden()
    expect(form.get_by_role("checkbox", name="monitor:read", exact=True)).to_be_checked()
    expect(form.get_by_role("checkbox", name="site:read", exact=True)).not_to_be_checked()
    form.get_by_label("Name", exact=True).fill("Deploys (staging)")
    form.get_by_role("checkbox", name="monitor:read", exact=True).uncheck()
    form.get_by_role("checkbox", name="site:read", exact=True).check()
    form.get_by_role("checkbox", name="site:write", exact=True).check()
    expect(form.get_by_label("Expires", exact=True)).to_have_value("")
    form.get_by_label("Expires", exact=True).fill("2031-06-30T23:45")  # Kathmandu: 18:00 UTC
    screenshot(page, screenshots, "edit")
    form.get_by_role("button", name="Save").click()

    expect(form).to_be_hidden()
    edited = row(page, "Deploys (staging)")
    expect(edited.get_by_role("listitem")).to_have_text(["site:read", "site:write"])
    expect(edited.get_by_role("button", name="Edit")).to_be_focused()
    [stored] = [
        k
        for k in server.request("GET", "/api/keys", org.sdk).json()["data"]
        if k["kind"] == "custom"
    ]
    assert (stored["name"], stored["scopes"]) == ("Deploys (staging)", ["site:read", "site:write"])
    assert stored["expires_at"] == "2031-06-30T18:00:00.000000Z"

    # The expiry, cleared.
    edited.get_by_role("button", name="Edit").click()
    expect(form.get_by_label("Expires", exact=True)).to_have_value("2031-06-30T23:45")
    form.get_by_role("button", name="No expiry").click()
    expect(form.get_by_label("Expires", exact=True)).to_have_value("")
    form.get_by_role("button", name="Save").click()
    expect(cell(page, "Deploys (staging)", "Expires")).to_have_text("Never")
    assert read_key(server, org.sdk, stored["key"])["expires_at"] is None

    # A key of a fixed kind: its name changes, its scopes are said, not offered.
    row(page, "Telemetry").get_by_role("button", name="Edit").click()
    expect(scope_boxes(form)).to_have_count(0)
    expect(form).to_contain_text("The scopes of a telemetry key are fixed")
    form.get_by_label("Name", exact=True).fill("Telemetry (old)")
    form.get_by_label("Name", exact=True).press("Enter")
    expect(cell(page, "Telemetry (old)", "Kind")).to_have_text("telemetry")


def test_rotate_replaces_a_key_after_a_grace_period_and_shows_the_new_one_once(
    tab, server, org, screenshots
):
    deploys = make_key(server, org.sdk, "Deploys", ["monitor:read"])
    nightly = make_key(server, org.sdk, "Nightly", ["site:read"])
    page = tab.page
    use_key(page, org.sdk)

    # At once (grace 0): the old key is gone, its replacement shown once.
    row(page, "Deploys").get_by_role("button", name="Rotate").click()
    rotate = dialog(page, "Rotate this key?")
    expect(rotate).to_contain_text("Deploys")
    grace = rotate.get_by_label("Grace period (seconds)", exact=True)
    expect(grace).to_be_focused()
    expect(grace).to_have_attribute("type", "number")
    expect(grace).to_have_value("0")
    rotate.get_by_role("button", name="Rotate key").click()
    rotated = dialog(page, "Key rotated")
    expect(rotated.get_by_role("textbox", name="New key")).to_have_value(FULL_KEY)
    expect(rotated).to_contain_text("it will not be shown again")
    replacement = rotated.get_by_role("textbox", name="New key").input_value()
    close_new_key(page)
    expect(row(page, "Deploys")).to_contain_text(identifier(replacement) + "...")
    gone = server.request("GET", f"/api/keys/{identifier(deploys['key'])}", org.sdk)
    assert gone.status == 404
    mine = read_key(server, org.sdk, identifier(replacement))
    assert (mine["name"], mine["scopes"]) == ("Deploys", ["monitor:read"])

    # With a grace period, and an expiry for the replacement.
    row(page, "Nightly").get_by_role("button", name="Rotate").click()
    grace.fill("3600")
    rotate.get_by_label("Expires", exact=True).fill("2032-03-04T05:45")  # Kathmandu: 00:00 UTC
    screenshot(page, screenshots, "rotate")
    rotate.get_by_role("button", name="Rotate key").click()
    replacement = rotated.get_by_role("textbox", name="New key").input_value()
    close_new_key(page)
    old = read_key(server, org.sdk, identifier(nightly["key"]))
    ends = datetime.fromisoformat(old["expires_at"].replace("Z", "+00:00"))
    assert abs((ends - datetime.now(UTC)).total_seconds() - 3600) < 60
    assert read_key(server, org.sdk, identifier(replacement))["expires_at"] == (
        "2032-03-04T00:00:00.000000Z"
    )
    expect(row(page, "Nightly")).to_have_count(2)  # the old one, until it expires

    # Refusals: the API's, shown in the dialog; nothing is rotated.
    tab.expect_refusal(422)
    row(page, "Nightly").last.get_by_role("button", name="Rotate").click()
    grace.fill("2592001")
    rotate.get_by_role("button", name="Rotate key").click()
    expect(rotate.get_by_role("alert")).to_contain_text("Grace period (seconds)")
    expect(grace).to_have_accessible_description(re.compile(r"^Grace period \(seconds\): Must be"))
    rotate.get_by_role("button", name="Cancel").click()
    expect(row(page, "Nightly")).to_have_count(2)

    # The key in use, rotated: the page goes on with its replacement.
    row(page, "SDK Integration").get_by_role("button", name="Rotate").click()
    rotate.get_by_role("button", name="Rotate key").click()
    replacement = rotated.get_by_role("textbox", name="New key").input_value()
    close_new_key(page)
    assert page.evaluate("() => sessionStorage.getItem('apiKey')") == replacement
    expect(page.get_by_role("banner")).to_contain_text(identifier(replacement) + "...")
    page.get_by_label("Filter by kind", exact=True).select_option("sdk_integration")
    expect(page.get_by_text("Page 1 of 1 · 1 key", exact=True)).to_be_visible()
    assert server.request("GET", "/api/keys", org.sdk).status == 401


def test_rotate_says_when_the_new_key_expires_and_it_does(tab, server, org):
    # 06:15:30 UTC is 12:00:30 in Kathmandu: the input holds minutes, the API seconds.
    limited = make_key(server, org.sdk, "Quarterly", expires_at="2031-01-15T06:15:30Z")
    make_key(server, org.sdk, "Forever")
    make_key(server, org.sdk, "Bygone", expires_at=in_seconds(1))
    page = tab.page
    use_key(page, org.sdk)
    rotate = dialog(page, "Rotate this key?")
    line = page.locator("#rotate-expiry")
    inherited = re.compile(r"^The new key expires 15 Jan 2031, 12:00 \S+\.$")

    # A future expiry: the new key keeps it, unless the person says otherwise.
    row(page, "Quarterly").get_by_role("button", name="Rotate").click()
    expect(line).to_have_text(inherited)
    expect(rotate).to_have_accessible_description(re.compile(r"The new key expires 15 Jan"))
    expect(rotate.get_by_label("Expires", exact=True)).to_have_value("2031-01-15T12:00")
    rotate.get_by_role("button", name="No expiry").click()
    expect(line).to_have_text("The new key does not expire.")
    rotate.get_by_label("Expires", exact=True).fill("2032-03-04T05:45")
    expect(line).to_have_text(re.compile(r"^The new key expires 4 Mar 2032, 05:45 "))
    rotate.get_by_role("button", name="Cancel").click()
    row(page, "Quarterly").get_by_role("button", name="Rotate").click()
    expect(line).to_have_text(inherited)  # afresh
    rotate.get_by_role("button", name="Rotate key").click()
    rotated = dialog(page, "Key rotated")
    successor = rotated.get_by_role("textbox", name="New key").input_value()
    close_new_key(page)
    expect(row(page, "Quarterly")).to_contain_text(identifier(successor) + "...")
    expect(cell(page, "Quarterly", "Expires")).to_contain_text("15 Jan 2031")
    kept = read_key(server, org.sdk, identifier(successor))["expires_at"]
    assert kept == limited["expires_at"] == "2031-01-15T06:15:30.000000Z"

    # "No expiry" makes the next one permanent, as the line says.
    row(page, "Quarterly").get_by_role("button", name="Rotate").click()
    rotate.get_by_role("button", name="No expiry").click()
    expect(line).to_have_text("The new key does not expire.")
    rotate.get_by_role("button", name="Rotate key").click()
    successor = rotated.get_by_role("textbox", name="New key").input_value()
    close_new_key(page)
    assert read_key(server, org.sdk, identifier(successor))["expires_at"] is None

    # No expiry, or one already past: none for the new key either.
    page.wait_for_timeout(1100)
    for name in ("Forever", "Bygone"):
        row(page, name).get_by_role("button", name="Rotate").click()
        expect(line).to_have_text("The new key does not expire.")
        expect(rotate.get_by_label("Expires", exact=True)).to_have_value("")
        rotate.get_by_role("button", name="Cancel").click()


def test_an_expired_key_is_listed_renamed_and_refused_as_the_key_in_use(tab, server, org):
    tab.expect_refusal(401)
    short = make_key(server, org.sdk, "Short-lived", ["monitor:read"], expires_at=in_seconds(3600))
    page = tab.page
    use_key(page, short["key"])
    expect(cell(page, "Short-lived", "Expires")).not_to_have_text("Never")
    # Brought near only now that the page holds the list: a machine slow to show it never
    # meets the expiry first.
    ends = datetime.now(UTC) + timedelta(seconds=3)
    expiry = {"expires_at": ends.isoformat().replace("+00:00", "Z")}
    moved = server.request("PUT", f"/api/keys/{identifier(short['key'])}", org.sdk, expiry)
    assert moved.status == 200, moved.body
    page.wait_for_timeout(max(0.0, (ends - datetime.now(UTC)).total_seconds()) * 1000 + 100)

    # Its next request: 401 expired_key, and the person is asked for a key again.
    page.get_by_label("Filter by kind", exact=True).select_option("custom")
    expect(page.get_by_label("API key", exact=True)).to_be_focused()
    expect(page.get_by_role("alert").first).to_contain_text("This key has expired")

    # Another key sees it listed as expired, and can rename it: its expiry stays.
    use_key(page, org.sdk)
    expect(cell(page, "Short-lived", "Expires")).to_contain_text("Expired")
    row(page, "Short-lived").get_by_role("button", name="Edit").click()
    form = dialog(page, "Edit key")
    form.get_by_label("Name", exact=True).fill("Short-lived (expired)")
    form.get_by_role("button", name="Save").click()
    expect(form).to_be_hidden()
    renamed = read_key(server, org.sdk, identifier(short["key"]))
    assert renamed["name"] == "Short-lived (expired)"
    assert renamed["expires_at"] == moved.json()["expires_at"]


def test_delete_asks_for_confirmation(tab, server, org):
    doomed = make_key(server, org.sdk, "Doomed")
    page = tab.page
    use_key(page, org.sdk)
    row(page, "Doomed").get_by_role("button", name="Delete").click()
    confirm = dialog(page, "Delete this key?")
    expect(confirm).to_contain_text("Doomed")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    confirm.get_by_role("button", name="Cancel").click()
    expect(confirm).to_be_hidden()
    expect(row(page, "Doomed")).to_have_count(1)
    assert server.request("GET", f"/api/keys/{identifier(doomed['key'])}", org.sdk).status == 200

    row(page, "Doomed").get_by_role("button", name="Delete").click()
    confirm.get_by_role("button", name="Delete key").click()
    expect(confirm).to_be_hidden()
    expect(row(page, "Doomed")).to_have_count(0)
    assert names_listed(page) == ["Telemetry", "SDK Integration"]
    assert server.request("GET", f"/api/keys/{identifier(doomed['key'])}", org.sdk).status == 404


def test_paging_and_the_kind_filter_work_as_in_the_api(tab, server, org):
    for number in range(1, 13):
        make_key(server, org.sdk, f"Key {number:02}")
    page = tab.page
    use_key(page, org.sdk)
    expect(page.get_by_text("Page 1 of 1 · 14 keys")).to_be_visible()
    page.get_by_label("Keys per page", exact=True).select_option("10")
    expect(page.get_by_text("Page 1 of 2 · 14 keys")).to_be_visible()
    assert len(names_listed(page)) == 10
    expect(page.get_by_role("button", name="Previous page")).to_be_disabled()
    page.get_by_role("button", name="Next page").click()
    expect(page.get_by_text("Page 2 of 2 · 14 keys")).to_be_visible()
    assert names_listed(page) == ["Key 09", "Key 10", "Key 11", "Key 12"]
    expect(page.get_by_role("button", name="Next page")).to_be_disabled()

    page.get_by_label("Filter by kind", exact=True).select_option("custom")
    expect(page.get_by_text("Page 1 of 2 · 12 keys")).to_be_visible()
    assert names_listed(page)[0] == "Key 01"
    page.get_by_label("Filter by kind", exact=True).select_option("telemetry")
    expect(page.get_by_text("Page 1 of 1 · 1 key", exact=True)).to_be_visible()
    assert names_listed(page) == ["Telemetry"]

    # Deleting the last key of the last page shows the page before.
    page.get_by_label("Filter by kind", exact=True).select_option("")
    page.get_by_label("Keys per page", exact=True).select_option("25")
    page.get_by_label("Keys per page", exact=True).select_option("10")
    page.get_by_role("button", name="Next page").click()
    for name in ["Key 09", "Key 10", "Key 11", "Key 12"]:
        row(page, name).get_by_role("button", name="Delete").click()
        page.get_by_role("button", name="Delete key").click()
        expect(row(page, name)).to_have_count(0)
    expect(page.get_by_text("Page 1 of 1 · 10 keys")).to_be_visible()


def held_back(page: Page, pattern: str, choose) -> Callable[[], None]:
    """Route the requests matching `pattern` into a hold, `choose()` (which sends one), and
    wait until it is held; returns what lets it go and waits for its answer to arrive."""
    held = []
    page.route(pattern, lambda route: held.append(route))
    choose()
    deadline = time.monotonic() + WAIT_MS / 1000
    while not held:
        assert time.monotonic() < deadline, f"no request for {pattern}"
        page.wait_for_timeout(50)

    def release() -> None:
        with page.expect_response(lambda answer: answer.request == held[0].request):
            held[0].continue_()
        page.wait_for_timeout(200)  # the page's handling of it, had it been kept

    return release


def test_an_older_list_answer_arriving_last_is_not_shown(tab, server, org):
    """Keys per page chosen twice quickly: the first choice's answer, held back until the
    second's has arrived, must not replace it."""
    for number in range(1, 13):
        make_key(server, org.sdk, f"Key {number:02}")
    page = tab.page
    use_key(page, org.sdk)
    expect(page.get_by_text("Page 1 of 1 · 14 keys")).to_be_visible()
    per_page = page.get_by_label("Keys per page", exact=True)
    release = held_back(page, "**/api/keys?*page_size=25*", lambda: per_page.select_option("25"))
    per_page.select_option("10")
    expect(page.get_by_text("Page 1 of 2 · 14 keys")).to_be_visible()
    release()
    expect(page.get_by_text("Page 1 of 2 · 14 keys")).to_be_visible()
    assert len(names_listed(page)) == 10
    expect(page.get_by_role("button", name="Next page")).to_be_enabled()


def test_a_refused_key_sends_the_person_back_to_the_key_input(tab, server, org):
    page = tab.page
    tab.expect_refusal(401, 403)
    page.get_by_label("API key", exact=True).fill("ak_not_a_key")
    page.get_by_role("button", name="Use key").click()
    expect(page.get_by_role("alert")).to_contain_text("This is not a whole API key")
    expect(page.get_by_label("API key", exact=True)).to_be_focused()

    page.get_by_label("API key", exact=True).fill(org.telemetry)
    page.get_by_role("button", name="Use key").click()
    expect(page.get_by_role("alert")).to_contain_text("Telemetry keys cannot manage")
    assert page.evaluate("() => sessionStorage.length") == 0

    # A key deleted while in use: the next request is a 401, and the person is asked again.
    spare = make_key(server, org.sdk, "Spare", ["monitor:read"])
    use_key(page, spare["key"])
    assert server.request("DELETE", f"/api/keys/{identifier(spare['key'])}", org.sdk).status == 204
    page.get_by_label("Filter by kind", exact=True).select_option("custom")
    expect(page.get_by_label("API key", exact=True)).to_be_focused()
    expect(page.get_by_role("heading", name="Keys of your organization")).to_be_hidden()
    expect(page.get_by_role("alert").first).to_have_text("This key is unknown or was deleted.")
    assert page.evaluate("() => sessionStorage.length") == 0


def test_names_are_shown_as_text_never_as_html(tab, server, org):
    make_key(server, org.sdk, XSS)
    page = tab.page
    use_key(page, org.sdk)
    expect(row(page, XSS)).to_have_count(1)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    form.get_by_label("Name", exact=True).fill('"><script>alert(2)</script>')
    form.get_by_role("checkbox", name="issue:read").check()
    form.get_by_role("button", name="Create").click()
    close_new_key(page)
    expect(row(page, '"><script>alert(2)</script>')).to_have_count(1)
    row(page, XSS).get_by_role("button", name="Delete").click()
    expect(dialog(page, "Delete this key?")).to_contain_text(XSS)
    page.keyboard.press("Escape")
    assert page.locator("#rows img, #rows script, dialog img").count() == 0
    assert tab.dialogs == []


def test_markup_that_got_into_the_page_would_not_run(tab, org):
    """The Content-Security-Policy, tried in Chromium: the page as served, with injected
    markup added, runs no inline script or handler, loads nothing from elsewhere, and
    writes no HTML from strings (Trusted Types)."""
    page = tab.page
    injected = (
        '<script>window.ran = "inline"</script>'
        "<img src=page/none.png onerror=\"window.ran = 'handler'\">"
        '<script src="https://example.org/x.js"></script>'
    )

    def add_markup(route) -> None:
        served = route.fetch()
        assert "frame-ancestors 'none'" in served.headers["content-security-policy"]
        body = served.text().replace("</body>", injected + "</body>")
        route.fulfill(response=served, body=body)

    page.route(tab.origin + "/", add_markup)
    page.reload()
    use_key(page, org.sdk)
    tab.expect_refusal(404)  # the image itself is this origin's, and missing
    assert page.evaluate("() => window.ran") is None
    refused = [message for message in tab.console_errors if not REFUSED.search(message)]
    assert len(refused) == 3, refused
    assert all("Content Security Policy" in message for message in refused), refused
    written = page.evaluate(
        """() => {
            try { document.body.insertAdjacentHTML("beforeend", "<b>x</b>"); }
            catch (error) { return error.name; }
        }"""
    )
    assert written == "TypeError"
    tab.console_errors.clear()


def test_keyboard_alone_does_everything(tab, server, org):
    for number in range(1, 4):
        make_key(server, org.sdk, f"Old {number}")
    page = tab.page
    keyboard = page.keyboard

    def tab_to(locator, limit: int = 60) -> None:
        for _ in range(limit):
            if locator.evaluate("element => element === document.activeElement"):
                outline = locator.evaluate("element => getComputedStyle(element).outlineStyle")
                assert outline != "none", "the focus is not visible"
                return
            keyboard.press("Tab")
        pytest.fail(f"Tab never reached {locator}")

    expect(page.get_by_label("API key", exact=True)).to_be_focused()
    keyboard.type(org.sdk)
    keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Keys of your organization")).to_be_focused()

    # Create.
    tab_to(page.get_by_role("button", name="New key"))
    keyboard.press("Enter")
    form = dialog(page, "Create a key")
    expect(form.get_by_label("Name", exact=True)).to_be_focused()
    keyboard.type("Typed")
    tab_to(form.get_by_role("checkbox", name="statuspage:read"))
    keyboard.press("Space")
    tab_to(form.get_by_role("button", name="Create"))
    keyboard.press("Enter")
    created = dialog(page, "Key created")
    expect(created.get_by_role("button", name="Copy")).to_be_focused()
    keyboard.press("Enter")
    expect(created.get_by_role("status")).to_have_text("Copied to the clipboard.")
    tab_to(created.get_by_role("button", name="Done"))
    keyboard.press("Enter")
    expect(row(page, "Typed").get_by_role("listitem")).to_have_text(["statuspage:read"])

    # Edit.
    tab_to(row(page, "Typed").get_by_role("button", name="Edit"))
    keyboard.press("Enter")
    expect(dialog(page, "Edit key").get_by_label("Name", exact=True)).to_be_focused()
    keyboard.press("ControlOrMeta+a")
    keyboard.type("Typed again")
    keyboard.press("Enter")
    expect(row(page, "Typed again").get_by_role("button", name="Edit")).to_be_focused()

    # Escape leaves a dialog, and the focus returns where it was.
    keyboard.press("Enter")
    keyboard.press("Escape")
    expect(row(page, "Typed again").get_by_role("button", name="Edit")).to_be_focused()

    # Rotate, with a grace period typed in.
    tab_to(row(page, "Old 1").get_by_role("button", name="Rotate"))
    keyboard.press("Enter")
    expect(page.get_by_label("Grace period (seconds)", exact=True)).to_be_focused()
    keyboard.press("ControlOrMeta+a")
    keyboard.type("60")
    keyboard.press("Enter")
    rotated = dialog(page, "Key rotated")
    expect(rotated.get_by_role("button", name="Copy")).to_be_focused()
    keyboard.press("Escape")  # asks first: the key will not be shown again
    expect(rotated.get_by_role("button", name="Back to the key")).to_be_focused()
    keyboard.press("Shift+Tab")
    expect(rotated.get_by_role("button", name="Close", exact=True)).to_be_focused()
    keyboard.press("Enter")
    expect(row(page, "Old 1")).to_have_count(2)

    # Delete, confirmed.
    tab_to(row(page, "Old 2").get_by_role("button", name="Delete"))
    keyboard.press("Enter")
    keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Delete key")).to_be_focused()
    keyboard.press("Enter")
    expect(row(page, "Old 2")).to_have_count(0)

    # Paging and the filter.
    tab_to(page.get_by_label("Keys per page", exact=True))
    keyboard.press("Home")  # 10 a page
    keyboard.press("ArrowDown")
    keyboard.press("ArrowUp")
    tab_to(page.get_by_label("Filter by kind", exact=True))
    keyboard.press("End")  # custom
    expect(page.get_by_text("Page 1 of 1 · 4 keys")).to_be_visible()

    # Forget the key.
    page.get_by_role("heading", name="Keys of your organization").focus()
    keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Forget key")).to_be_focused()
    keyboard.press("Enter")
    expect(page.get_by_label("API key", exact=True)).to_be_focused()


@pytest.mark.parametrize("size", [NARROW, WIDE], ids=["390px", "1400px"])
def test_the_page_reads_well_at_390_and_1400_pixels(tab, server, org, screenshots, size):
    make_key(server, org.sdk, "A rather long name for a key used by the nightly backups")
    make_key(server, org.sdk, "Status", ["statuspage:read", "statuspage:write"])
    page = tab.page
    page.set_viewport_size(size)
    use_key(page, org.sdk)
    # Nothing wider than the window: no sideways scrolling.
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= size["width"]
    for control in page.get_by_role("button").all():
        if control.is_visible():
            box = control.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= size["width"], control
    # Every cell still names its column to assistive technology.
    headers = page.get_by_role("columnheader").all_text_contents()
    assert headers[:6] == ["Name", "Kind", "Scopes", "Created", "Last used", "Expires"]
    expect(row(page, "Status").get_by_role("cell")).to_have_count(8)
    if size is NARROW:
        screenshot(page, screenshots, "list-narrow")
        row(page, "Status").get_by_role("button", name="Edit").click()
        form = dialog(page, "Edit key")
        box = form.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= size["width"]
        form.get_by_role("button", name="Save").click()
        expect(form).to_be_hidden()


def test_swagger_ui_renders_the_document_offline_without_a_console_error(tab):
    """/docs, beside the page: Swagger UI draws every operation of the served document,
    with nothing fetched from another origin and no console error (the tab checks)."""
    page = tab.page
    page.goto("/docs")
    for summary in ("List API keys", "Create an API key", "Rotate an API key"):
        expect(page.get_by_text(summary, exact=True).first).to_be_visible()
    expect(page.get_by_role("button", name="Authorize")).to_be_visible()
    expect(page.get_by_text("Problem", exact=True).first).to_be_attached()


# --- people's rough edges (docs/design.md, "The page") ----------------------------------------


def test_a_mistyped_incomplete_shown_or_unknown_key_says_so(tab, server, org):
    """What was pasted is judged in people's words: a key's shape (and checksum) by the page
    itself, with no request; a well-formed key by the API's answer."""
    page = tab.page
    field = page.get_by_label("API key", exact=True)
    said = page.locator("#sign-in-error")

    def paste(value: str, words: str) -> None:
        field.fill(value)
        page.get_by_role("button", name="Use key").click()
        expect(said).to_contain_text(words)
        expect(field).to_be_focused()
        expect(field).to_have_attribute("aria-invalid", "true")
        expect(field).to_have_accessible_description(re.compile(re.escape(words)))
        assert page.evaluate("() => sessionStorage.length") == 0

    shown = identifier(org.sdk) + "..."
    paste(shown, "This is the shown form of a key: paste the full key")
    paste(org.sdk[:-1], "This is not a whole API key: check that you pasted all of it")
    paste(org.sdk[:20], "This is not a whole API key")
    swapped = org.sdk[:30] + ("A" if org.sdk[30] != "A" else "B") + org.sdk[31:]
    paste(swapped, "This is not a whole API key")  # its checksum fails
    paste(org.sdk + "x", "This is not a whole API key")
    assert tab.bearer == set(), "a key of the wrong shape was sent to the API"

    tab.expect_refusal(401)
    unknown = new_key("ak_")[1]
    paste(unknown, "This key is unknown or was deleted")
    ended = make_key(server, org.sdk, "Ended", expires_at=in_seconds(1))
    page.wait_for_timeout(1100)
    paste(ended["key"], "This key has expired")
    disabled = make_key(server, org.sdk, "Switched off", enabled=False)
    paste(disabled["key"], "This key is disabled")
    assert "HTTP Basic" not in page.locator("body").inner_text()

    # A good key clears the marks.
    use_key(page, org.sdk)
    page.get_by_role("button", name="Forget key").click()
    expect(field).not_to_have_attribute("aria-invalid", "true")
    expect(said).to_be_empty()


def test_field_errors_use_the_labels_on_screen_and_are_tied_to_their_inputs(tab, server, org):
    make_key(server, org.sdk, "Nightly")
    page = tab.page
    use_key(page, org.sdk)
    tab.expect_refusal(422)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    name = form.get_by_label("Name", exact=True)
    expires = form.get_by_label("Expires", exact=True)

    name.fill("   ")
    expires.fill("2001-02-03T04:05")  # past
    form.get_by_role("button", name="Create").click()
    summary = form.get_by_role("alert")
    expect(summary).to_have_text("The request is not valid: Name, Expires.")
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(name).to_have_accessible_description(re.compile(r"^Name: Must not be empty"))
    expect(expires).to_have_attribute("aria-invalid", "true")
    expect(expires).to_have_accessible_description(re.compile(r"Expires: Must be in the future"))
    expect(name).to_be_focused()  # the first field to correct
    text = form.inner_text()
    for api_name in ("expires_at", "name:"):
        assert api_name not in text

    # Corrected, but no scope: the marks go with their errors, the scopes are marked.
    name.fill("Backups")
    form.get_by_role("button", name="No expiry").click()
    form.get_by_role("button", name="Create").click()
    expect(summary).to_have_text("The request is not valid: Scopes.")
    expect(name).not_to_have_attribute("aria-invalid", "true")
    expect(name).to_have_accessible_description("")
    expect(expires).not_to_have_attribute("aria-invalid", "true")
    for box in scope_boxes(form).all():
        expect(box).to_have_attribute("aria-invalid", "true")
        expect(box).to_have_accessible_description(re.compile(r"^Scopes: A custom key needs"))
    expect(scope_boxes(form).first).to_be_focused()
    assert "scopes:" not in form.inner_text()
    form.get_by_role("checkbox", name="site:read").check()
    form.get_by_role("button", name="Create").click()
    close_new_key(page)
    page.get_by_role("button", name="New key").click()
    expect(form.locator('[aria-invalid="true"]')).to_have_count(0)
    expect(form.get_by_role("alert")).to_be_empty()
    form.get_by_role("button", name="Cancel").click()

    # Rotate: the grace period, by its label.
    row(page, "Nightly").get_by_role("button", name="Rotate").click()
    rotate = dialog(page, "Rotate this key?")
    grace = rotate.get_by_label("Grace period (seconds)", exact=True)
    grace.fill("2592001")
    rotate.get_by_role("button", name="Rotate key").click()
    expect(rotate.get_by_role("alert")).to_have_text(
        "The request is not valid: Grace period (seconds)."
    )
    expect(grace).to_have_attribute("aria-invalid", "true")
    expect(grace).to_have_accessible_description(
        re.compile(r"^Grace period \(seconds\): Must be .* 2592000\. How long the old key")
    )
    grace.fill("")
    rotate.get_by_role("button", name="Rotate key").click()
    expect(grace).to_have_accessible_description(
        re.compile(r"^Grace period \(seconds\): Give a number of seconds")
    )
    assert "grace_seconds" not in rotate.inner_text()
    rotate.get_by_role("button", name="Cancel").click()
    expect(row(page, "Nightly")).to_have_count(1)


def test_a_refusal_shows_its_message_once(tab, server, org):
    """A 403 says what is wrong once, in the dialog's alert; the field it concerns is marked
    and described by it."""
    mine = make_key(server, org.sdk, "Monitors", ["monitor:read", "monitor:write"])
    page = tab.page
    use_key(page, mine["key"])
    tab.expect_refusal(403)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    form.get_by_label("Name", exact=True).fill("Writer")
    form.get_by_role("checkbox", name="monitor:write").check()
    # Meanwhile, elsewhere, the key in use gives up monitor:write.
    narrowed = server.request(
        "PUT", f"/api/keys/{identifier(mine['key'])}", org.sdk, {"scopes": ["monitor:read"]}
    )
    assert narrowed.status == 200
    form.get_by_role("button", name="Create").click()
    summary = form.get_by_role("alert")
    expect(summary).to_have_text("These scopes exceed the calling key's own: monitor:write.")
    expect(form.get_by_text(re.compile("exceed|Not held"))).to_have_count(1)
    box = form.get_by_role("checkbox", name="monitor:write")
    expect(box).to_have_attribute("aria-invalid", "true")
    expect(box).to_have_accessible_description(re.compile("exceed the calling key's own"))


def test_deleting_the_key_in_use_warns_first_and_says_so_after(tab, server, org, screenshots):
    make_key(server, org.sdk, "Other")
    page = tab.page
    use_key(page, org.sdk)
    warning = (
        "This is the key you are using: after deleting it the page can do nothing more "
        "until you paste another key"
    )
    row(page, "Other").get_by_role("button", name="Delete").click()
    confirm = dialog(page, "Delete this key?")
    expect(confirm.get_by_text(warning)).to_be_hidden()
    expect(confirm).not_to_have_accessible_description(re.compile("key you are using"))
    confirm.get_by_role("button", name="Cancel").click()

    row(page, "SDK Integration").get_by_role("button", name="Delete").click()
    expect(confirm.get_by_text(warning)).to_be_visible()
    expect(confirm).to_have_accessible_description(re.compile(re.escape(warning)))
    confirm.get_by_role("button", name="Delete key").click()
    # No request after the delete: the page knows, with no 401 (the tab would see one).
    expect(page.get_by_label("API key", exact=True)).to_be_focused()
    expect(page.locator("#sign-in-error")).to_have_text(
        "The key in use was deleted: paste another key to go on."
    )
    expect(page.get_by_role("heading", name="Keys of your organization")).to_be_hidden()
    assert page.evaluate("() => sessionStorage.length") == 0
    assert server.request("GET", "/api/keys", org.sdk).status == 401


def test_controls_fit_the_key_in_use(tab, server, org, screenshots):
    """What the key in use can never do is offered disabled, saying why (docs/design.md,
    "Permissions": no key alters a key holding scopes it lacks, nor makes a key beyond its own
    scopes; and "Key policy": a key that expires makes none that outlives it)."""
    ends = "2035-05-06T07:08:00Z"
    mine = make_key(server, org.sdk, "Monitors", ["monitor:read", "monitor:write"], expires_at=ends)
    make_key(server, org.sdk, "Reader", ["monitor:read"])
    make_key(server, org.sdk, "Status", ["statuspage:read"])
    page = tab.page
    use_key(page, mine["key"])

    for name in ("Monitors", "Reader"):
        for action in ("Edit", "Rotate", "Delete"):
            expect(row(page, name).get_by_role("button", name=action)).to_be_enabled()
    for name, lacking in [
        ("Status", "statuspage:read"),
        ("Telemetry", "monitor:telemetry"),
        ("SDK Integration", "monitor:telemetry"),
    ]:
        why = re.compile(f"holds scopes the key in use lacks: .*{lacking}")
        expect(row(page, name)).to_contain_text(why)
        for action in ("Edit", "Rotate", "Delete"):
            button = row(page, name).get_by_role("button", name=action)
            expect(button).to_be_disabled()
            expect(button).to_have_accessible_description(why)
    screenshot(page, screenshots, "list-limited")

    # Kinds whose fixed scopes exceed the key in use: offered disabled, saying why.
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    kind = form.get_by_label("Kind", exact=True)
    disabled = kind.locator("option:disabled")
    expect(disabled).to_have_count(2)
    assert sorted(disabled.evaluate_all("all => all.map(o => o.value)")) == [
        "sdk_integration",
        "telemetry",
    ]
    expect(kind).to_have_accessible_description(
        re.compile("telemetry and sdk_integration keys hold scopes the key in use lacks")
    )
    # The key in use expires: so does every key it makes, at the latest with it.
    expect(form.get_by_role("button", name="No expiry")).to_be_disabled()
    expect(form.get_by_label("Expires", exact=True)).to_have_accessible_description(
        re.compile(r"Empty: it expires with the key in use, 6 May 2035, 12:53")
    )
    form.get_by_label("Name", exact=True).fill("Made by Monitors")
    form.get_by_role("checkbox", name="monitor:read").check()
    form.get_by_role("button", name="Create").click()
    close_new_key(page)
    made = [k for k in server.request("GET", "/api/keys", org.sdk).json()["data"]]
    assert [k["expires_at"] for k in made if k["name"] == "Made by Monitors"] == [
        "2035-05-06T07:08:00.000000Z"
    ]
    row(page, "Reader").get_by_role("button", name="Rotate").click()
    rotate = dialog(page, "Rotate this key?")
    expect(rotate.get_by_role("button", name="No expiry")).to_be_disabled()
    expect(rotate.locator("#rotate-expiry")).to_have_text(
        re.compile(r"^The new key expires 6 May 2035, 12:53 ")
    )
    rotate.get_by_role("button", name="Cancel").click()


def test_a_replaced_key_the_key_in_use_and_when_keys_were_made_are_shown(
    tab, server, org, screenshots
):
    nightly = make_key(server, org.sdk, "Nightly")
    page = tab.page
    rotated = server.request(
        "POST", f"/api/keys/{identifier(nightly['key'])}/rotate", org.sdk, {"grace_seconds": 3600}
    )
    assert rotated.status == 201
    successor = rotated.json()
    old = read_key(server, org.sdk, identifier(nightly["key"]))
    use_key(page, org.sdk)

    headers = page.get_by_role("columnheader").all_text_contents()
    assert headers[:6] == ["Name", "Kind", "Scopes", "Created", "Last used", "Expires"]
    expect(cell(page, "Nightly", "Created").first).to_contain_text(shown_time(old["created"]))

    # The old one says by which key, and when it ends; it cannot be rotated again.
    [before, after] = row(page, "Nightly").all()
    replaced = f"replaced by {identifier(successor['key'])}..., ends "
    expect(before).to_contain_text(replaced + "")
    expect(before).to_contain_text(shown_time(old["expires_at"]))
    expect(after).not_to_contain_text("replaced by")
    expect(before.get_by_role("button", name="Rotate")).to_be_disabled()
    expect(before.get_by_role("button", name="Rotate")).to_have_accessible_description(
        re.compile("replaced already: rotate its successor")
    )
    expect(before.get_by_role("button", name="Edit")).to_be_enabled()
    expect(after.get_by_role("button", name="Rotate")).to_be_enabled()

    # The key in use, marked (and only it).
    expect(page.get_by_text("this key", exact=True)).to_have_count(1)
    mark = row(page, "SDK Integration").get_by_text("this key", exact=True)
    expect(mark).to_be_visible()
    expect(row(page, "SDK Integration").get_by_role("cell").first).to_contain_text(
        "the key you are using"
    )
    screenshot(page, screenshots, "list-replaced")


# Each dialog a person can open, on the list of keys (the delete of the key in use).
DIALOGS = ("create", "edit", "rotate", "delete", "new-key", "close-new-key")


POLICY = {
    "enabled": False,
    "allowed_ips": ["10.0.0.0/8", "2001:db8:1234:5678:9abc:def0:1234:5600/120"],
    "rate_limit": {"requests": 1000000, "seconds": 86400},
    "quota": {"requests": 1000000000, "period": "lifetime"},
    "metadata": {"customer": "c-42", "ticket": "a rather long ticket reference, " * 3},
}


def open_dialog(page: Page, which: str):
    """Open the dialog `which` (of DIALOGS); it, found by its name."""
    if which == "create":
        page.get_by_role("button", name="New key").click()
        form = dialog(page, "Create a key")
        form.get_by_role("button", name="Add metadata").click()  # a row of its own
        return form
    if which == "edit":  # with a policy of every kind
        row(page, "Nightly backups").get_by_role("button", name="Edit").click()
        return dialog(page, "Edit key")
    if which == "rotate":
        row(page, "Nightly backups").get_by_role("button", name="Rotate").click()
        return dialog(page, "Rotate this key?")
    if which == "delete":  # the key in use: with its warning
        in_use = page.get_by_role("row").filter(has=page.get_by_text("this key", exact=True))
        in_use.get_by_role("button", name="Delete").click()
        return dialog(page, "Delete this key?")
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    form.get_by_label("Name", exact=True).fill("Deploys from the build server")
    form.get_by_role("checkbox", name="monitor:read", exact=True).check()
    form.get_by_role("button", name="Create").click()
    created = dialog(page, "Key created")
    expect(created.get_by_role("textbox", name="New key")).to_have_value(FULL_KEY)
    if which == "close-new-key":
        page.keyboard.press("Escape")
        expect(created.get_by_role("group", name=re.compile("^Close?"))).to_be_visible()
    return created


def close_dialog(page: Page, which: str, shown) -> None:
    if which == "new-key":
        close_new_key(page)
    elif which == "close-new-key":  # asking already
        shown.get_by_role("button", name="Close", exact=True).click()
    else:
        shown.get_by_role("button", name="Cancel").click()
    expect(shown).to_be_hidden()


# Every element of a dialog lies within the dialog's box and the viewport.
OVERFLOWING = """dialog => {
    const width = document.documentElement.clientWidth;
    const frame = dialog.getBoundingClientRect();
    const out = [];
    if (frame.left < 0 || frame.right > width) out.push(`the dialog: ${frame.left}-${frame.right}`);
    if (dialog.scrollWidth > dialog.clientWidth) out.push("the dialog scrolls sideways");
    for (const element of dialog.querySelectorAll("*")) {
        const box = element.getBoundingClientRect();
        if (box.width === 0 && box.height === 0) continue;
        if (box.left < frame.left - 0.5 || box.right > frame.right + 0.5)
            out.push(`${element.tagName} ${element.id || element.textContent.trim().slice(0, 30)}`
                     + `: ${box.left}-${box.right} of ${frame.left}-${frame.right}`);
    }
    return out;
}"""


@pytest.mark.parametrize("width", [360, 390, 400, 430])
def test_every_dialog_fits_from_360_to_430_pixels(tab, server, org, screenshots, width):
    make_key(server, org.sdk, "Nightly backups", expires_at="2031-01-15T06:15:30Z", **POLICY)
    page = tab.page
    page.set_viewport_size({"width": width, "height": 844})
    use_key(page, org.sdk)
    overflowing = {}
    for which in DIALOGS:
        shown = open_dialog(page, which)
        expect(shown).to_be_visible()
        found = shown.evaluate(OVERFLOWING)
        if found:
            overflowing[which] = found
        if width == 390:
            screenshot(page, screenshots, f"dialog-{which}-390")
        close_dialog(page, which, shown)
    assert overflowing == {}


def test_the_new_key_dialog_asks_before_closing_on_escape(tab, server, org):
    page = tab.page
    use_key(page, org.sdk)
    created = open_dialog(page, "new-key")
    value = created.get_by_role("textbox", name="New key").input_value()
    question = created.get_by_role("group", name="Close? The key will not be shown again.")

    # A stray Escape asks; Escape again (or Back to the key) keeps the key on screen.
    page.keyboard.press("Escape")
    expect(question).to_be_visible()
    expect(question.get_by_role("button", name="Back to the key")).to_be_focused()
    page.keyboard.press("Escape")
    expect(question).to_be_hidden()
    expect(created).to_be_visible()
    expect(created.get_by_role("textbox", name="New key")).to_have_value(value)
    page.keyboard.press("Escape")
    question.get_by_role("button", name="Back to the key").click()
    expect(created).to_be_visible()

    # Done, the key not copied: the same question; Close closes.
    created.get_by_role("button", name="Done").click()
    expect(question).to_be_visible()
    question.get_by_role("button", name="Close", exact=True).click()
    expect(created).to_be_hidden()
    assert value not in page.content()

    # Copied: Done closes at once; Escape still asks.
    created = open_dialog(page, "new-key")
    created.get_by_role("button", name="Copy").click()
    page.keyboard.press("Escape")
    expect(question).to_be_visible()
    question.get_by_role("button", name="Back to the key").click()
    created.get_by_role("button", name="Done").click()
    expect(created).to_be_hidden()


AXE = PROJECT / "tests/server/axe/node_modules/axe-core/axe.min.js"
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


NEEDS_AXE = pytest.mark.skipif(
    not AXE.exists(),
    reason="axe-core is not installed: make test installs it where npm is",
)


@NEEDS_AXE
@pytest.mark.parametrize("size", [{"width": 1280, "height": 900}, {"width": 390, "height": 844}])
def test_every_view_passes_axe_cores_wcag_2_a_and_aa_rules(tab, server, org, size):
    """axe-core (pinned in tests/server/axe) injected into each view, its dialogs and their
    error states: no violation of WCAG 2.0 and 2.1, levels A and AA."""
    make_key(
        server, org.sdk, "Nightly backups", ["site:read"], expires_at=in_seconds(86400), **POLICY
    )
    rotated = server.request(
        "POST",
        f"/api/keys/{identifier(make_key(server, org.sdk, 'Weekly')['key'])}/rotate",
        org.sdk,
        {"grace_seconds": 600},
    )
    assert rotated.status == 201
    everything_but_one = [
        scope for scope in read_key(server, org.sdk, identifier(org.sdk))["scopes"]
    ][:-1]
    mine = make_key(server, org.sdk, "Almost everything", everything_but_one)
    page = tab.page
    page.set_viewport_size(size)
    source = AXE.read_text()
    violations = {}

    def check(view: str) -> None:
        expect(page.locator('[aria-busy="true"]')).to_have_count(0)  # a list loading is dimmed
        if not page.evaluate("() => typeof axe === 'object'"):
            page.evaluate(source)
        found = page.evaluate(
            "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})"
            ".then(result => result.violations.map("
            "v => `${v.id}: ${v.help} (${v.nodes.map(n => n.target.join(' ')).join(', ')})`))",
            WCAG,
        )
        if found:
            violations[view] = found

    tab.expect_refusal(401, 422)
    check("sign-in")
    page.get_by_label("API key", exact=True).fill(identifier(org.sdk) + "...")
    page.get_by_role("button", name="Use key").click()
    check("sign-in, a message")
    use_key(page, mine["key"])
    check("list")
    for which in DIALOGS:
        shown = open_dialog(page, which)
        check(which)
        if which == "create":
            shown.get_by_role("button", name="Create").click()
            expect(shown.get_by_role("alert")).not_to_be_empty()
            check("create, field errors")
        if which == "edit":  # the policy's errors, the page's and the API's
            shown.get_by_label("Per seconds", exact=True).fill("")
            shown.get_by_label("Metadata name", exact=True).first.fill("bad name")
            shown.get_by_role("button", name="Save").click()
            expect(shown.get_by_role("alert")).not_to_be_empty()
            check("edit, the page's policy errors")
            shown.get_by_label("Per seconds", exact=True).fill("60")
            shown.get_by_label("Allowed IPs", exact=True).fill("10.0.0.1/8")
            shown.get_by_role("button", name="Save").click()
            expect(shown.get_by_role("alert")).to_contain_text("Allowed IPs, Metadata")
            check("edit, the API's policy errors")
            shown.get_by_label("Quota requests", exact=True).fill("0")
            shown.get_by_role("button", name="Save").click()
            expect(shown.get_by_role("alert")).to_contain_text("Allowed IPs, Quota, Metadata")
            check("edit, a quota's error")
        if which == "rotate":
            shown.get_by_label("Grace period (seconds)", exact=True).fill("")
            shown.get_by_role("button", name="Rotate key").click()
            expect(shown.get_by_role("alert")).not_to_be_empty()
            check("rotate, field errors")
        close_dialog(page, which, shown)
    # The filters in use; the audit log, with the key that may read it.
    page.get_by_label("State", exact=True).select_option("disabled")
    page.get_by_label("Unused for", exact=True).select_option("30")
    expect(page.get_by_text("Page 1 of 1 · 1 key", exact=True)).to_be_visible()
    check("list, filtered")
    page.get_by_role("button", name="Forget key").click()
    use_key(page, org.sdk)
    page.get_by_role("button", name="Audit log").click()
    expect(page.get_by_text(re.compile(r"^Page 1 of 1 · \d+ events$"))).to_be_visible()
    check("audit log")
    page.get_by_label("Action", exact=True).select_option("key.revoked")
    expect(page.get_by_text("No events: Revoked as leaked (key.revoked).")).to_be_visible()
    check("audit log, nothing found")
    # A key's usage: its chart, scopes by use, and Narrow scopes disabled with its reason.
    page.get_by_role("button", name="Back to keys").click()
    row(page, "Nightly backups").get_by_role("button", name="Usage").click()
    expect(page.get_by_role("heading", name="Usage of Nightly backups")).to_be_focused()
    check("usage")
    assert violations == {}


# --- a key's policy, the filters and the audit log --------------------------------------------


def sent_bodies(page: Page, method: str) -> list[dict]:
    """The JSON bodies the page sends with `method` to /api/keys..., as they are sent."""
    bodies: list[dict] = []

    def on_request(request) -> None:
        if request.method == method and "/api/keys" in request.url:
            bodies.append(json.loads(request.post_data or "null"))

    page.on("request", on_request)
    return bodies


def test_create_and_edit_carry_a_keys_policy(tab, server, org, screenshots):
    page = tab.page
    use_key(page, org.sdk)
    posted, put = sent_bodies(page, "POST"), sent_bodies(page, "PUT")
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    expect(form.get_by_role("checkbox", name="Enabled")).to_be_checked()
    expect(form.get_by_label("Allowed IPs", exact=True)).to_have_accessible_description(
        re.compile(r"One address or network per line.*Empty: from anywhere\.")
    )
    expect(form.get_by_label("Metadata name", exact=True)).to_have_count(0)
    form.get_by_label("Name", exact=True).fill("Billing export")
    form.get_by_role("checkbox", name="monitor:read", exact=True).check()
    form.get_by_label("Allowed IPs", exact=True).fill("10.0.0.0/8\n\n  2001:db8::/32 \n")
    form.get_by_label("Requests", exact=True).fill("100")
    form.get_by_label("Per seconds", exact=True).fill("60")
    expect(form.get_by_label("Requests", exact=True)).to_have_accessible_description(
        re.compile("Both empty: no limit of its own")
    )
    for _ in range(3):
        form.get_by_role("button", name="Add metadata").click()
    expect(form.get_by_label("Metadata name", exact=True).last).to_be_focused()
    names, values = (
        form.get_by_label("Metadata name", exact=True),
        form.get_by_label("Metadata value", exact=True),
    )
    names.nth(0).fill("customer")
    values.nth(0).fill("c-42")
    names.nth(1).fill("scratch")
    names.nth(2).fill("team")
    values.nth(2).fill("billing")
    expect(form.get_by_role("button", name="Remove metadata scratch")).to_be_visible()
    form.get_by_role("button", name="Remove metadata scratch").click()
    expect(names).to_have_count(2)
    expect(names.nth(1)).to_be_focused()  # the row after the removed one
    form.get_by_role("button", name="Add metadata").click()  # left empty: says nothing
    screenshot(page, screenshots, "create-policy")
    page.set_viewport_size(NARROW)
    form.get_by_role("button", name="Add metadata").scroll_into_view_if_needed()
    screenshot(page, screenshots, "dialog-create-policy-390")
    page.set_viewport_size(WIDE)
    form.get_by_role("button", name="Create").click()
    close_new_key(page)

    assert posted[-1] == {
        "name": "Billing export",
        "kind": "custom",
        "scopes": ["monitor:read"],
        "allowed_ips": ["10.0.0.0/8", "2001:db8::/32"],
        "rate_limit": {"requests": 100, "seconds": 60},
        "metadata": {"customer": "c-42", "team": "billing"},
    }
    [made] = [
        k
        for k in server.request("GET", "/api/keys", org.sdk).json()["data"]
        if k["name"] == "Billing export"
    ]
    assert (made["enabled"], made["allowed_ips"], made["rate_limit"], made["metadata"]) == (
        True,
        ["10.0.0.0/8", "2001:db8::/32"],
        {"requests": 100, "seconds": 60},
        {"customer": "c-42", "team": "billing"},
    )
    listed = row(page, "Billing export")
    expect(listed).to_contain_text("limited to 100 per 60 s · from 2 networks")
    expect(listed).not_to_contain_text("disabled")

    # Edit shows the policy, and sends only what changed.
    listed.get_by_role("button", name="Edit").click()
    edit = dialog(page, "Edit key")
    expect(edit.get_by_role("checkbox", name="Enabled")).to_be_checked()
    expect(edit.get_by_label("Allowed IPs", exact=True)).to_have_value("10.0.0.0/8\n2001:db8::/32")
    expect(edit.get_by_label("Requests", exact=True)).to_have_value("100")
    expect(edit.get_by_label("Per seconds", exact=True)).to_have_value("60")
    expect(edit.get_by_label("Metadata name", exact=True)).to_have_count(2)
    expect(edit.get_by_label("Metadata value", exact=True).nth(1)).to_have_value("billing")
    edit.get_by_role("checkbox", name="Enabled").uncheck()
    edit.get_by_label("Requests", exact=True).fill("")
    edit.get_by_label("Per seconds", exact=True).fill("")
    edit.get_by_role("button", name="Save").click()
    expect(edit).to_be_hidden()
    assert put[-1] == {"enabled": False, "rate_limit": None}
    expect(row(page, "Billing export")).to_contain_text("disabled")
    expect(row(page, "Billing export")).not_to_contain_text("limited to")

    row(page, "Billing export").get_by_role("button", name="Edit").click()
    edit.get_by_role("button", name="Remove metadata team").click()
    expect(
        edit.get_by_label("Metadata name", exact=True)
    ).to_be_focused()  # the row before: the last
    edit.get_by_label("Allowed IPs", exact=True).fill("")
    edit.get_by_role("checkbox", name="Enabled").check()
    edit.get_by_role("button", name="Save").click()
    expect(edit).to_be_hidden()
    assert put[-1] == {"enabled": True, "allowed_ips": [], "metadata": {"customer": "c-42"}}
    stored = read_key(server, org.sdk, made["key"])
    assert (stored["enabled"], stored["allowed_ips"], stored["rate_limit"], stored["metadata"]) == (
        True,
        [],
        None,
        {"customer": "c-42"},
    )
    expect(row(page, "Billing export")).to_contain_text("metadata: customer")

    # Nothing changed: nothing is sent.
    row(page, "Billing export").get_by_role("button", name="Edit").click()
    edit.get_by_role("button", name="Save").click()
    expect(edit).to_be_hidden()
    assert len(put) == 2


def test_policy_errors_land_under_their_inputs_by_their_labels(tab, server, org):
    page = tab.page
    use_key(page, org.sdk)
    posted = sent_bodies(page, "POST")
    tab.expect_refusal(422)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    form.get_by_label("Name", exact=True).fill("Bad policy")
    form.get_by_role("checkbox", name="monitor:read", exact=True).check()
    requests, seconds = (
        form.get_by_label("Requests", exact=True),
        form.get_by_label("Per seconds", exact=True),
    )
    ips = form.get_by_label("Allowed IPs", exact=True)
    summary = form.get_by_role("alert")

    # What an input cannot hand over, the page says: a limit without its window, a name twice.
    requests.fill("100")
    form.get_by_role("button", name="Add metadata").click()
    form.get_by_role("button", name="Add metadata").click()
    names, values = (
        form.get_by_label("Metadata name", exact=True),
        form.get_by_label("Metadata value", exact=True),
    )
    names.nth(0).fill("team")
    names.nth(1).fill("team")
    form.get_by_role("button", name="Create").click()
    expect(summary).to_have_text("The request is not valid: Rate limit, Metadata.")
    expect(seconds).to_have_attribute("aria-invalid", "true")
    expect(seconds).to_have_accessible_description(
        re.compile(r"^Per seconds: Give both, or empty Requests too for no limit\.")
    )
    expect(requests).not_to_have_attribute("aria-invalid", "true")
    expect(seconds).to_be_focused()
    for index in (0, 1):
        expect(names.nth(index)).to_have_accessible_description(
            "Metadata name “team”: Given more than once."
        )
    assert posted == []

    # The API's: each message under its input, by the line or row it concerns.
    seconds.fill("0")
    names.nth(1).fill("bad name")
    values.nth(0).fill("x" * 501)
    ips.fill("10.0.0.0/8\n\n10.0.0.1/8")
    form.get_by_role("button", name="Create").click()
    expect(summary).to_have_text("The request is not valid: Allowed IPs, Rate limit, Metadata.")
    expect(ips).to_have_attribute("aria-invalid", "true")
    expect(ips).to_have_accessible_description(
        re.compile(r"^Allowed IPs, line 3: Has host bits set: give the network's own address")
    )
    expect(seconds).to_have_accessible_description(re.compile(r"^Per seconds: Must be"))
    expect(requests).not_to_have_attribute("aria-invalid", "true")
    expect(names.nth(1)).to_have_attribute("aria-invalid", "true")
    expect(names.nth(1)).to_have_accessible_description(
        re.compile(r"Metadata name “bad name”: Names are 1 to 40 characters")
    )
    expect(values.nth(0)).to_have_attribute("aria-invalid", "true")
    expect(values.nth(0)).to_have_accessible_description(
        re.compile(r"Metadata value of “team”: Too long: at most 500\.")
    )
    expect(names.nth(0)).not_to_have_attribute("aria-invalid", "true")
    expect(ips).to_be_focused()
    text = form.inner_text()
    for api_name in ("allowed_ips", "rate_limit", "Item "):
        assert api_name not in text
    form.get_by_role("button", name="Cancel").click()


def test_what_exceeds_the_key_in_use_is_said_at_its_input(tab, server, org):
    """403 exceeds_caller (docs/design.md, "Key policy") names allowed_ips or expires_at: the alert
    says the API's detail once, and the input it concerns is marked and described by it."""
    mine = make_key(
        server,
        org.sdk,
        "Local only",
        ["monitor:read"],
        allowed_ips=["127.0.0.0/8"],
        expires_at="2035-05-06T07:08:00Z",
    )
    page = tab.page
    use_key(page, mine["key"])
    tab.expect_refusal(403)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    ips = form.get_by_label("Allowed IPs", exact=True)
    expect(ips).to_have_accessible_description(
        re.compile(r"The key in use is limited to 127\.0\.0\.0/8: empty means the same")
    )
    form.get_by_label("Name", exact=True).fill("Elsewhere")
    form.get_by_role("checkbox", name="monitor:read", exact=True).check()
    ips.fill("10.0.0.0/8")
    form.get_by_role("button", name="Create").click()
    summary = form.get_by_role("alert")
    expect(summary).to_have_text(re.compile("The calling key is limited to some addresses"))
    expect(ips).to_have_attribute("aria-invalid", "true")
    expect(ips).to_have_accessible_description(re.compile("^The calling key is limited"))
    expect(form.get_by_text(re.compile("The calling key is limited"))).to_have_count(1)

    ips.fill("127.0.0.0/16")
    form.get_by_label("Expires", exact=True).fill("2036-01-01T00:00")
    form.get_by_role("button", name="Create").click()
    expect(summary).to_have_text(re.compile("The calling key expires at"))
    expect(form.get_by_label("Expires", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(ips).not_to_have_attribute("aria-invalid", "true")
    form.get_by_label("Expires", exact=True).fill("")
    form.get_by_role("button", name="Create").click()
    close_new_key(page)
    expect(row(page, "Elsewhere")).to_contain_text("from 127.0.0.0/16")


def test_the_list_says_disabled_and_limited_and_filters_by_state_and_use(
    tab, server, org, screenshots
):
    make_key(server, org.sdk, "Switched off", enabled=False)
    make_key(
        server,
        org.sdk,
        "Limited",
        rate_limit={"requests": 100, "seconds": 60},
        quota={"requests": 50000, "period": "month"},
        allowed_ips=["10.0.0.0/8", "2001:db8:1234:5678:9abc:def0:1234:5600/120"],
        metadata={"customer": "c-42", "team": "a team with a rather long name"},
    )
    make_key(server, org.sdk, "Ended", expires_at=in_seconds(1))
    for number in range(1, 11):
        make_key(server, org.sdk, f"Off {number:02}", enabled=False)
    page = tab.page
    page.wait_for_timeout(1100)
    use_key(page, org.sdk)
    urls: list[str] = []
    page.on("request", lambda request: "/api/keys?" in request.url and urls.append(request.url))

    off = row(page, "Switched off")
    expect(off.get_by_text("disabled", exact=True)).to_be_visible()  # words, not colour alone
    expect(row(page, "Limited")).to_contain_text(
        "limited to 100 per 60 s · 50,000 of 50,000 uses left this month · from 2 networks · "
        "metadata: customer, team"
    )
    expect(row(page, "Limited")).not_to_contain_text("disabled")
    screenshot(page, screenshots, "list-policy")

    state = page.get_by_label("State", exact=True)
    state.select_option("disabled")
    expect(page.get_by_text("Page 1 of 1 · 11 keys")).to_be_visible()
    assert "enabled=false" in urls[-1] and "state=" not in urls[-1]
    page.get_by_label("Keys per page", exact=True).select_option("10")
    expect(page.get_by_text("Page 1 of 2 · 11 keys")).to_be_visible()
    page.get_by_role("button", name="Next page").click()
    expect(page.get_by_text("Page 2 of 2 · 11 keys")).to_be_visible()
    assert names_listed(page) == ["Off 10"]
    page.get_by_label("Filter by kind", exact=True).select_option("telemetry")  # combined: none
    expect(page.get_by_text("Page 1 of 1 · 0 keys")).to_be_visible()
    expect(page.get_by_role("cell", name="No keys match these filters.")).to_be_visible()
    page.get_by_label("Filter by kind", exact=True).select_option("")
    page.get_by_label("Keys per page", exact=True).select_option("50")

    state.select_option("expired")
    expect(page.get_by_text("Page 1 of 1 · 1 key", exact=True)).to_be_visible()
    assert names_listed(page) == ["Ended"]
    state.select_option("active")
    expect(page.get_by_text("Page 1 of 1 · 14 keys")).to_be_visible()
    assert "state=active" in urls[-1]
    state.select_option("")

    # Unused for 30 days: every key but the one in use (each the page reads is used).
    page.get_by_label("Unused for", exact=True).select_option("30")
    # Waited for by its rows: the list of all keys before it may also show 14.
    expect(row(page, "SDK Integration")).to_have_count(0)
    expect(page.get_by_text("Page 1 of 1 · 14 keys")).to_be_visible()
    since = re.search(r"unused_since=([^&]+)", urls[-1]).group(1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d%3A\d\d%3A\d\d\.\d{3}Z", since), since
    moment = datetime.fromisoformat(since.replace("%3A", ":").replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - moment) - timedelta(days=30)) < timedelta(minutes=1)
    page.get_by_label("Unused for", exact=True).select_option("90")
    state.select_option("disabled")
    expect(page.get_by_text("Page 1 of 1 · 11 keys")).to_be_visible()
    assert "enabled=false" in urls[-1] and "unused_since=" in urls[-1]

    # At 390 px: nothing wider than the window.
    state.select_option("")
    page.get_by_label("Unused for", exact=True).select_option("")
    page.set_viewport_size(NARROW)
    expect(page.get_by_text("Page 1 of 1 · 15 keys")).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= NARROW["width"]
    row(page, "Limited").scroll_into_view_if_needed()
    screenshot(page, screenshots, "list-policy-narrow")


def test_the_audit_log_shows_the_organizations_events(tab, server, org, screenshots):
    for number in range(1, 9):
        make_key(server, org.sdk, f"Batch {number}")
    nightly = make_key(server, org.sdk, "Nightly", ["monitor:read"])
    changed = server.request(
        "PUT",
        f"/api/keys/{identifier(nightly['key'])}",
        org.sdk,
        {
            "name": "Nightly backups",
            "rate_limit": {"requests": 100, "seconds": 60},
            "enabled": False,
            "expires_at": "2031-01-15T06:15:00Z",
        },
    )
    assert changed.status == 200
    rotated = server.request(
        "POST", f"/api/keys/{identifier(nightly['key'])}/rotate", org.sdk, {"grace_seconds": 60}
    )
    assert rotated.status == 201
    gone = make_key(server, org.sdk, "Gone soon")
    assert server.request("DELETE", f"/api/keys/{identifier(gone['key'])}", org.sdk).status == 204
    page = tab.page
    use_key(page, org.sdk)
    audit = page.get_by_role("button", name="Audit log")
    expect(audit).to_be_enabled()
    audit.click()
    expect(page.get_by_role("heading", name="Audit log")).to_be_focused()
    expect(page.get_by_role("heading", name="Keys of your organization")).to_be_hidden()
    table = page.get_by_role("table", name="Audit log")
    headers = table.get_by_role("columnheader").all_text_contents()
    assert headers == ["Time", "Action", "Actor", "Target", "Changes"]
    expect(page.get_by_text("Page 1 of 1 · 16 events")).to_be_visible()

    events = server.request("GET", "/api/audit?action=key.updated", org.sdk).json()["data"]
    [update] = events
    # Actions in words; actors and targets by name, with their shown values (issue 36).
    updated = table.get_by_role("row").filter(has=page.get_by_text("Updated", exact=True))
    expect(updated).to_have_count(1)
    expect(updated.get_by_role("cell").first).to_contain_text(shown_time(update["at"]))
    cells = updated.get_by_role("cell")
    expect(cells.nth(2)).to_have_text(f"SDK Integration ({identifier(org.sdk)}...)")
    expect(cells.nth(3)).to_have_text(f"Nightly backups ({identifier(nightly['key'])}...)")
    # A deleted key is still named in its events.
    deleted = table.get_by_role("row").filter(has=page.get_by_text("Deleted", exact=True))
    expect(deleted.get_by_role("cell").nth(3)).to_have_text(
        f"Gone soon ({identifier(gone['key'])}...)"
    )
    changes = updated.get_by_role("listitem")
    expect(changes).to_contain_text(
        [
            "Name: Nightly → Nightly backups",
            "Expires: never → 15 Jan 2031, 12:00",
            "Enabled: yes → no",
            "Rate limit: none → 100 per 60 s",
        ]
    )
    rotation = table.get_by_role("row").filter(has=page.get_by_text("Rotated", exact=True))
    expect(rotation).to_contain_text("Replaced by: " + identifier(rotated.json()["key"]) + "...")
    expect(rotation).to_contain_text("Grace period (seconds): 60")
    first = table.get_by_role("row").filter(has=page.get_by_text("Telemetry", exact=False)).last
    expect(first.get_by_role("cell").nth(2)).to_have_text("Operator (command line)")
    expect(first).to_contain_text("Name: Telemetry")
    expect(first).to_contain_text("Scopes: monitor:telemetry")
    expect(first).not_to_contain_text("Enabled")  # a default is no news
    screenshot(page, screenshots, "audit")

    # The Action filter, and paging.
    page.get_by_label("Action", exact=True).select_option("key.updated")
    expect(page.get_by_text("Page 1 of 1 · 1 event", exact=True)).to_be_visible()
    expect(table.get_by_role("row")).to_have_count(2)
    # The filter keeps the codes beside the words, as the API's `action` takes them.
    options = page.get_by_label("Action", exact=True).locator("option").all_text_contents()
    assert "Revoked as leaked (key.revoked)" in options
    page.get_by_label("Action", exact=True).select_option("key.created")
    page.get_by_label("Events per page", exact=True).select_option("10")
    expect(page.get_by_text("Page 1 of 2 · 13 events")).to_be_visible()
    page.get_by_role("button", name="Next page").click()
    expect(page.get_by_text("Page 2 of 2 · 13 events")).to_be_visible()
    expect(table.get_by_role("row")).to_have_count(4)
    expect(page.get_by_role("button", name="Next page")).to_be_disabled()
    page.get_by_label("Action", exact=True).select_option("key.revoked")
    expect(
        table.get_by_role("cell", name="No events: Revoked as leaked (key.revoked).")
    ).to_be_visible()
    page.get_by_label("Action", exact=True).select_option("")

    # At 390 px: each event a card, nothing wider than the window.
    page.set_viewport_size(NARROW)
    expect(page.get_by_text("Page 1 of 2 · 16 events")).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= NARROW["width"]
    screenshot(page, screenshots, "audit-narrow")
    page.set_viewport_size(WIDE)

    # Back to the keys, and by the keyboard alone there and back.
    page.get_by_role("button", name="Back to keys").click()
    expect(audit).to_be_focused()
    expect(page.get_by_role("heading", name="Audit log")).to_be_hidden()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Audit log")).to_be_focused()
    expect(page.get_by_text("Page 1 of 2 · 16 events")).to_be_visible()  # afresh, 10 a page
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Back to keys")).to_be_focused()
    page.keyboard.press("Enter")
    expect(audit).to_be_focused()

    # Forgetting the key leaves the audit log too.
    audit.click()
    page.get_by_role("button", name="Forget key").click()
    expect(page.get_by_role("heading", name="Audit log")).to_be_hidden()
    expect(page.get_by_label("API key", exact=True)).to_be_focused()


def test_an_older_audit_answer_arriving_last_is_not_shown(tab, server, org):
    """An action chosen, then events per page, quickly: the action's answer, held back until
    the second's has arrived, must not replace it."""
    for number in range(1, 12):
        make_key(server, org.sdk, f"Key {number:02}")
    page = tab.page
    use_key(page, org.sdk)
    page.get_by_role("button", name="Audit log").click()
    expect(page.get_by_text("Page 1 of 1 · 13 events")).to_be_visible()
    action = page.get_by_label("Action", exact=True)
    release = held_back(
        page, "**/api/audit?*action=key.created*", lambda: action.select_option("key.created")
    )
    page.route("**/api/audit?*action=key.created*", lambda route: route.continue_())
    page.get_by_label("Events per page", exact=True).select_option("10")
    expect(page.get_by_text("Page 1 of 2 · 13 events")).to_be_visible()
    release()
    expect(page.get_by_text("Page 1 of 2 · 13 events")).to_be_visible()
    expect(page.get_by_role("table", name="Audit log").get_by_role("row")).to_have_count(11)


def test_the_audit_log_says_quotas_grants_and_webhooks_in_words(tab, server, org):
    """What a person reads in Changes and Target: a quota as "2 a day", a grant as a
    sentence, a webhook endpoint by its URL and its events in words; never a field's code,
    `period=day`, or an endpoint's id."""
    from tests.receivers import start_receiver

    receiver = start_receiver()
    try:
        metered = make_key(server, org.sdk, "Metered", quota={"requests": 2, "period": "day"})
        reference = f"/api/keys/{identifier(metered['key'])}"
        week = {"quota": {"requests": 5, "period": "week"}}
        assert server.request("PUT", reference, org.sdk, week).status == 200
        for grant in ({"add": 1}, {"set_remaining": 3}):
            assert server.request("POST", f"{reference}/quota", org.sdk, grant).status == 200
        body = {"url": receiver.url, "events": ["key.deleted"], "description": "On-call"}
        made = server.request("POST", "/api/webhooks", org.sdk, body)
        assert made.status == 201, made.body
        endpoint = made.json()["id"]
        changed = {"events": ["key.created", "key.deleted"]}
        assert server.request("PUT", f"/api/webhooks/{endpoint}", org.sdk, changed).status == 200
        renewed = server.request("POST", f"/api/webhooks/{endpoint}/secret", org.sdk)
        assert renewed.status == 200, renewed.body
        [secret] = server.request("GET", "/api/audit?action=webhook.new_secret", org.sdk).json()[
            "data"
        ]

        page = tab.page
        use_key(page, org.sdk)
        page.get_by_role("button", name="Audit log").click()
        table = page.get_by_role("table", name="Audit log")
        expect(page.get_by_text(re.compile(r"· 9 events$"))).to_be_visible()

        def changes(action: str, has_text: str = ""):
            """The Changes cell of the one event of `action` (holding `has_text`)."""
            event = table.get_by_role("row").filter(has=page.get_by_text(action, exact=True))
            return event.filter(has_text=has_text).get_by_role("cell").last

        expect(changes("Created", "Name: Metered")).to_contain_text("Quota: 2 a day")
        expect(changes("Updated")).to_have_text("Quota: 2 a day → 5 a week")
        grants = table.get_by_role("row").filter(has=page.get_by_text("Quota granted"))
        expect(grants.get_by_role("listitem")).to_have_text(
            ["Uses left set to 3: 6 left before, 3 after", "1 use granted: 5 left before, 6 after"]
        )
        # A webhook endpoint by its URL, in every event, the one that says none too.
        webhook = f"Webhook {receiver.url}"
        for action in ("Webhook created", "Webhook updated", "Webhook secret renewed"):
            event = table.get_by_role("row").filter(has=page.get_by_text(action, exact=True))
            expect(event.get_by_role("cell").nth(3)).to_have_text(webhook)
        expect(changes("Webhook created").get_by_role("listitem")).to_have_text(
            [f"URL: {receiver.url}", "Events: Key deleted", "Description: On-call"]
        )
        expect(changes("Webhook updated")).to_have_text(
            "Events: Key deleted → Key created, Key deleted"
        )
        expect(changes("Webhook secret renewed")).to_contain_text(
            re.compile(
                r"^The previous secret signs until \d+ \w+ \d{4}, "
                + shown_time(secret["details"]["previous_secret_expires_at"])
            )
        )
        said = table.inner_text()
        for code in ("quota:", "period=", "requests=", "remaining", "previous_secret", "ep_"):
            assert code not in said, code
    finally:
        receiver.stop()


def test_the_audit_log_is_offered_only_to_a_key_holding_every_scope(tab, server, org):
    mine = make_key(server, org.sdk, "Monitors", ["monitor:read", "monitor:write"])
    page = tab.page
    use_key(page, mine["key"])
    audit = page.get_by_role("button", name="Audit log")
    expect(audit).to_be_disabled()
    why = re.compile(
        r"only a key holding every scope may read it; the key in use lacks .*site:read"
    )
    expect(audit).to_have_accessible_description(why)
    expect(page.get_by_text(why)).to_be_visible()
    page.get_by_role("button", name="Forget key").click()
    use_key(page, org.sdk)
    expect(audit).to_be_enabled()
    expect(audit).to_have_accessible_description("")


# --- usage ------------------------------------------------------------------------------------


def use(server: Server, key: str, allowed: int, refused: int = 0) -> None:
    """`allowed` forward auth checks of `key` naming monitor:read, which it holds, and
    `refused` naming statuspage:read, which it lacks (forbidden)."""
    for scope, times, status in (("monitor:read", allowed, 204), ("statuspage:read", refused, 403)):
        for _ in range(times):
            answer = server.request("GET", f"/api/forward-auth?scope={scope}", key)
            assert answer.status == status, answer.body


def wait_for_usage(server: Server, key: str, reference: str, requests: int) -> dict:
    """The usage of `reference` once its `requests` uses are written (USAGE_FLUSH_SECONDS)."""
    deadline = datetime.now(UTC) + timedelta(seconds=10)
    while True:
        usage = server.request("GET", f"/api/keys/{reference}/usage", key).json()
        total = usage["total"]
        if total["allowed"] + sum(total["refused"].values()) >= requests:
            return usage
        assert datetime.now(UTC) < deadline, usage
        time.sleep(0.1)


def chart(page: Page, name: str):
    """The Usage cell of the key named `name`."""
    return cell(page, name, "Usage")


def test_the_list_charts_each_keys_last_30_days_of_use(tab, server, org, screenshots):
    deploys = make_key(server, org.sdk, "Deploys", ["monitor:read", "monitor:write", "site:read"])
    make_key(server, org.sdk, "Idle")
    for number in range(1, 11):
        make_key(server, org.sdk, f"Batch {number}")
    use(server, deploys["key"], 3, 2)
    wait_for_usage(server, org.sdk, identifier(deploys["key"]), 5)
    page = tab.page
    reads = {"now": 0, "most": 0, "all": 0}

    def started(request) -> None:
        if request.url.endswith("/usage"):
            reads["now"] += 1
            reads["all"] += 1
            reads["most"] = max(reads["most"], reads["now"])

    def ended(request) -> None:
        if request.url.endswith("/usage"):
            reads["now"] -= 1

    page.on("request", started)
    page.on("requestfinished", ended)
    page.on("requestfailed", ended)
    use_key(page, org.sdk)
    headers = page.get_by_role("columnheader").all_text_contents()
    assert headers[:7] == ["Name", "Kind", "Scopes", "Created", "Last used", "Expires", "Usage"]
    drawn = chart(page, "Deploys").get_by_role("img")
    expect(drawn).to_have_accessible_name("Last 30 days: 5 requests · 2 refused")
    expect(drawn).to_be_visible()
    # The same words for the eyes: every request, then how many of them were refused.
    expect(chart(page, "Deploys").locator(".figures")).to_have_text("5 requests · 2 refused")
    expect(chart(page, "Idle").get_by_role("img")).to_have_accessible_name(
        "Last 30 days: 0 requests · 0 refused"
    )
    # Allowed above the line, refused below it: told apart by where they stand, not by colour.
    today = drawn.locator(".allowed").last
    assert today.get_attribute("height") != "0"
    refusals = drawn.locator(".refused").last
    assert float(refusals.get_attribute("y")) >= float(today.get_attribute("y")) + float(
        today.get_attribute("height")
    )
    # One read per key on the page, at most 4 at a time.
    expect(page.locator("#rows svg[role=img]")).to_have_count(14)
    assert reads["all"] == 14
    assert 1 <= reads["most"] <= 4
    screenshot(page, screenshots, "list-usage")

    # A read refused: a dash, and why.
    tab.expect_refusal(429)
    page.route(
        f"**/api/keys/{identifier(deploys['key'])}.../usage",
        lambda route: route.fulfill(
            status=429,
            content_type="application/problem+json",
            body=json.dumps(
                {"status": 429, "code": "rate_limited", "detail": "Too many requests."}
            ),
        ),
    )
    page.get_by_label("Keys per page", exact=True).select_option("10")
    page.get_by_label("Keys per page", exact=True).select_option("50")
    expect(chart(page, "Deploys")).to_have_text(re.compile(r"^—\s*Usage not read: Too many"))
    expect(chart(page, "Deploys").get_by_role("img")).to_have_count(0)
    expect(chart(page, "Idle").get_by_role("img")).to_be_visible()

    # From 360 to 430 px: nothing wider than the window.
    page.unroute(f"**/api/keys/{identifier(deploys['key'])}.../usage")
    page.get_by_label("Keys per page", exact=True).select_option("10")
    for width in (360, 390, 400, 430):
        page.set_viewport_size({"width": width, "height": 844})
        expect(chart(page, "Idle").get_by_role("img")).to_be_visible()
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width
        if width == 390:
            screenshot(page, screenshots, "list-usage-narrow")


def test_a_keys_usage_view_shows_its_days_and_scopes_and_narrows_them(
    tab, server, org, screenshots
):
    deploys = make_key(server, org.sdk, "Deploys", ["monitor:read", "monitor:write", "site:read"])
    make_key(server, org.sdk, "Idle")
    use(server, deploys["key"], 3, 2)
    telemetry = server.request("GET", "/api/forward-auth?scope=monitor:telemetry", org.telemetry)
    assert telemetry.status == 204
    wait_for_usage(server, org.sdk, identifier(deploys["key"]), 5)
    wait_for_usage(server, org.sdk, identifier(org.telemetry), 1)
    page = tab.page
    use_key(page, org.sdk)

    opener = row(page, "Deploys").get_by_role("button", name="Usage")
    opener.click()
    view = page.get_by_role("region", name="Usage of Deploys")
    expect(view.get_by_role("heading", name="Usage of Deploys")).to_be_focused()
    expect(page.get_by_role("heading", name="Keys of your organization")).to_be_hidden()
    expect(view.get_by_role("img")).to_have_accessible_name("Last 30 days: 5 requests · 2 refused")
    axis = view.locator(".x-axis")
    expect(axis).to_contain_text(datetime.now(UTC).strftime("%-d %b"))  # UTC days
    expect(view.locator(".y-axis")).to_contain_text("3")
    # Each refusal in words, its code in its title (what the API's usage counts it under).
    refused = view.get_by_role("listitem").filter(has_text="Refused because")
    expect(refused).to_have_text(
        "Refused because the key lacked a scope (or a kind) the request needed: 2"
    )
    expect(refused).to_have_attribute("title", "forbidden")
    expect(view).not_to_contain_text("forbidden")
    scopes = view.get_by_role("table", name="Scopes by use")
    assert scopes.get_by_role("columnheader").all_text_contents() == ["Scope", "Checks"]
    expect(scopes.get_by_role("row").nth(1)).to_have_text(re.compile(r"monitor:read\s*3"))
    expect(view.get_by_role("list", name="Unused scopes").get_by_role("listitem")).to_have_text(
        ["monitor:write", "site:read"]
    )
    for width in (360, 390, 400, 430):
        page.set_viewport_size({"width": width, "height": 844})
        assert page.locator("#usage").evaluate(OVERFLOWING) == []
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width
        if width == 390:
            screenshot(page, screenshots, "usage-narrow")
    page.set_viewport_size(WIDE)
    screenshot(page, screenshots, "usage")

    # Narrow scopes: Edit, those scopes unchecked; cancelled, back where it began.
    narrow = view.get_by_role("button", name="Narrow scopes")
    narrow.click()
    form = dialog(page, "Edit key")
    expect(form.get_by_role("checkbox", name="monitor:read", exact=True)).to_be_checked()
    expect(form.get_by_role("checkbox", name="monitor:write", exact=True)).not_to_be_checked()
    expect(form.get_by_role("checkbox", name="site:read", exact=True)).not_to_be_checked()
    form.get_by_role("button", name="Cancel").click()
    expect(narrow).to_be_focused()
    # Saved, it finishes where it began: the key's usage, saying what changed, with no
    # unused scope left; the list behind it shows the key narrowed.
    narrow.click()
    form.get_by_role("button", name="Save").click()
    expect(form).to_be_hidden()
    expect(view.get_by_role("status")).to_have_text("Scopes narrowed to monitor:read.")
    expect(view.get_by_role("heading", name="Usage of Deploys")).to_be_focused()
    expect(view.get_by_role("list", name="Unused scopes")).to_be_hidden()
    expect(view).to_contain_text("None: every scope of this key was checked.")
    expect(narrow).to_be_disabled()
    view.get_by_role("button", name="Back to keys").click()
    expect(row(page, "Deploys").get_by_role("listitem")).to_have_text(["monitor:read"])
    expect(row(page, "Deploys").get_by_role("button", name="Usage")).to_be_focused()
    expect(page.get_by_role("status").filter(has_text="narrowed")).to_have_count(0)

    # Nothing to narrow, said under the button.
    for name, why in (
        ("Idle", "no check named a scope in these 30 days"),
        ("Telemetry", "the scopes of a telemetry key are fixed"),
        ("Deploys", "every scope of this key was checked in these 30 days"),
    ):
        row(page, name).get_by_role("button", name="Usage").click()
        narrow = page.get_by_role("button", name="Narrow scopes")
        expect(narrow).to_be_disabled()
        expect(narrow).to_have_accessible_description(re.compile(why))
        page.get_by_role("button", name="Back to keys").click()
        expect(row(page, name).get_by_role("button", name="Usage")).to_be_focused()

    # A key the key in use cannot edit: the reason Edit gives.
    mine = make_key(server, org.sdk, "Monitors", ["monitor:read", "monitor:write"])
    page.get_by_role("button", name="Forget key").click()
    use_key(page, mine["key"])
    row(page, "SDK Integration").get_by_role("button", name="Usage").click()
    expect(page.get_by_role("button", name="Narrow scopes")).to_have_accessible_description(
        re.compile("it holds scopes the key in use lacks")
    )

    # By the keyboard alone, there and back; forgetting the key leaves the view too.
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Back to keys")).to_be_focused()
    page.keyboard.press("Enter")
    usage = row(page, "SDK Integration").get_by_role("button", name="Usage")
    expect(usage).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Usage of SDK Integration")).to_be_focused()
    page.get_by_role("button", name="Forget key").click()
    expect(page.get_by_role("heading", name="Usage of SDK Integration")).to_be_hidden()
    expect(page.get_by_label("API key", exact=True)).to_be_focused()


def labelled_alone(scope, *labels: str) -> None:
    """Each label names one control, whose accessible name is the label alone (a select
    wrapped in its label would be named with its value too: "State All")."""
    for label in labels:
        control = scope.get_by_label(label, exact=True)
        expect(control).to_have_count(1)
        expect(control).to_have_accessible_name(label)


def test_a_keys_usage_says_why_uses_were_refused_in_words(tab, server, org):
    """A key past its quota: "Refused because the quota was used up: 2", not the code."""
    metered = make_key(server, org.sdk, "Trial", quota={"requests": 1, "period": "lifetime"})
    for status in (204, 429, 429):
        assert server.request("GET", "/api/forward-auth", metered["key"]).status == status
    wait_for_usage(server, org.sdk, identifier(metered["key"]), 3)
    page = tab.page
    use_key(page, org.sdk)
    row(page, "Trial").get_by_role("button", name="Usage").click()
    view = page.get_by_role("region", name="Usage of Trial")
    expect(view.get_by_role("listitem").filter(has_text="Allowed")).to_have_text("Allowed: 1")
    refused = view.get_by_role("listitem").filter(has_text="Refused")
    expect(refused).to_have_text("Refused because the quota was used up: 2")
    expect(refused).to_have_attribute("title", "quota_exceeded")


def test_every_control_is_named_by_its_label_alone(tab, server, org):
    make_key(server, org.sdk, "Nightly backups")
    page = tab.page
    labelled_alone(page, "API key")
    use_key(page, org.sdk)
    labelled_alone(page, "Filter by kind", "State", "Unused for", "Keys per page")
    page.get_by_label("State", exact=True).select_option("expired")
    labelled_alone(page, "State")  # whatever it shows
    page.get_by_label("State", exact=True).select_option("")

    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    form.get_by_role("button", name="Add metadata").click()
    labelled_alone(form, "Name", "Kind", "Expires", "Enabled", "Allowed IPs", "Requests")
    labelled_alone(form, "Per seconds", "Metadata name", "Metadata value", "monitor:read")
    labelled_alone(form, "Quota requests", "Quota period")
    expect(form.get_by_label("Quota period", exact=True).locator("option")).to_have_text(
        ["Day", "Week", "Month", "Lifetime"]
    )
    form.get_by_role("button", name="Cancel").click()

    row(page, "Nightly backups").get_by_role("button", name="Rotate").click()
    labelled_alone(dialog(page, "Rotate this key?"), "Grace period (seconds)", "Expires")
    page.get_by_role("button", name="Rotate key").click()
    labelled_alone(dialog(page, "Key rotated"), "New key")
    close_new_key(page)

    page.get_by_role("button", name="Audit log").click()
    labelled_alone(page, "Action", "Events per page")
    page.get_by_label("Action", exact=True).select_option("key.rotated")
    labelled_alone(page, "Action")


# Each `time` of the list's cells: how many lines it takes.
TIME_LINES = """table => [...table.querySelectorAll('tbody time')].map(time => {
    const range = document.createRange();
    range.selectNodeContents(time);
    const tops = [...range.getClientRects()].map(box => Math.round(box.top));
    return [time.closest('td').dataset.label, new Set(tops).size];
})"""


def test_the_list_fits_its_columns_at_1400_pixels(tab, server, org, screenshots):
    """Issue 36: times break between date and clock at most (never over four lines), and
    a key with many scopes says how many ("all 11 scopes"), listing them on demand."""
    ending = make_key(
        server,
        org.sdk,
        "A rather long name for a key used by the nightly backups",
        ["monitor:read", "site:read", "issue:read", "issue:write", "integration:read"],
        expires_at="2031-01-15T06:15:30Z",
    )
    make_key(server, org.sdk, "Status", ["statuspage:read", "statuspage:write"])
    page = tab.page
    use_key(page, org.sdk)  # the key in use has a Last used time now
    table = page.get_by_role("table", name="Keys of your organization")
    lines = table.evaluate(TIME_LINES)
    assert {label for label, _ in lines} == {"Created", "Last used", "Expires"}
    assert all(count <= 2 for _, count in lines), lines
    assert page.evaluate("() => document.documentElement.scrollWidth") <= WIDE["width"]

    sdk = cell(page, "SDK Integration", "Scopes")
    summary = sdk.get_by_text("all 11 scopes", exact=True)
    expect(summary).to_be_visible()
    expect(sdk.get_by_role("listitem").first).to_be_hidden()
    expect(cell(page, "Status", "Scopes").get_by_role("listitem")).to_have_text(
        ["statuspage:read", "statuspage:write"]
    )
    expect(cell(page, ending["name"], "Scopes").get_by_text("5 scopes", exact=True)).to_be_visible()
    summary.click()  # the list on demand
    expect(sdk.get_by_role("listitem")).to_have_count(11)
    expect(sdk.get_by_role("listitem").last).to_be_visible()
    screenshot(page, screenshots, "list-scopes")
    summary.click()
    expect(sdk.get_by_role("listitem").first).to_be_hidden()


# --- webhooks ---------------------------------------------------------------------------------


def wait_for_delivery(server: Server, key: str, endpoint: str, **wanted) -> dict:
    """The endpoint's newest delivery, once it shows `wanted` (status, tries...)."""
    deadline = datetime.now(UTC) + timedelta(seconds=15)
    while True:
        answer = server.request("GET", f"/api/webhooks/{endpoint}/deliveries", key).json()
        if answer["data"] and all(answer["data"][0][k] == v for k, v in wanted.items()):
            return answer["data"][0]
        assert datetime.now(UTC) < deadline, answer
        time.sleep(0.1)


def test_the_webhooks_view_shows_endpoints_and_deliveries_with_a_retry(
    tab, server, org, screenshots
):
    from tests.receivers import start_receiver

    receiver = start_receiver()
    receiver.answer = lambda request: (500, {})
    try:
        made = server.request(
            "POST",
            "/api/webhooks",
            org.sdk,
            {
                "url": receiver.url,
                "events": ["key.deleted", "key.created"],
                "description": "On-call",
            },
        )
        assert made.status == 201, made.body
        endpoint = made.json()
        make_key(server, org.sdk, "Nightly")
        wait_for_delivery(server, org.sdk, endpoint["id"], tries=1)
        page = tab.page
        use_key(page, org.sdk)
        open_webhooks = page.get_by_role("button", name="Webhooks")
        expect(open_webhooks).to_have_accessible_description("")
        open_webhooks.click()
        expect(page.get_by_role("heading", name="Webhooks")).to_be_focused()
        expect(page.get_by_role("heading", name="Keys of your organization")).to_be_hidden()
        endpoints = page.get_by_role("table", name="Endpoints")
        headers = endpoints.get_by_role("columnheader").all_text_contents()
        assert headers == ["URL", "Events", "Description", "State", "Actions"]
        listed = endpoints.get_by_role("row").filter(has=page.get_by_text(receiver.url))
        # Events in words, their codes in their titles (what the API's `events` take).
        events = listed.get_by_role("listitem")
        expect(events).to_have_text(["Key created", "Key deleted"])
        expect(events.first).to_have_attribute("title", "key.created")
        expect(listed).to_contain_text("On-call")
        expect(listed).to_contain_text("Enabled, failing")
        listed.get_by_role("button", name=f"Deliveries of {receiver.url}").click()
        expect(page.get_by_role("heading", name="Recent deliveries")).to_be_focused()
        deliveries = page.get_by_role("table", name="Recent deliveries")
        delivery = deliveries.get_by_role("row").filter(has=page.get_by_text("Nightly"))
        expect(delivery).to_contain_text("Key created")
        expect(delivery).not_to_contain_text("key.created")
        expect(delivery).to_contain_text("pending")
        expect(delivery.get_by_role("cell", name="500", exact=True)).to_be_visible()
        expect(page.get_by_text("1 most recent of 1 delivery")).to_be_visible()
        screenshot(page, screenshots, "webhooks")

        # A retry, once the receiver is back: sent at once, with the same id.
        receiver.answer = lambda request: (204, {})
        delivery.get_by_role("button", name="Retry Key created for Nightly").click()
        expect(page.get_by_text("Key created for Nightly will be sent again.")).to_be_visible()
        expect(page.get_by_role("heading", name="Recent deliveries")).to_be_focused()
        done = wait_for_delivery(server, org.sdk, endpoint["id"], status="delivered")
        assert {r.headers["webhook-id"] for r in receiver.received} == {done["id"]}
        listed.get_by_role("button", name=f"Deliveries of {receiver.url}").click()
        expect(delivery).to_contain_text("delivered")
        expect(delivery.get_by_role("cell", name="204", exact=True)).to_be_visible()

        # At 390 px: each endpoint and delivery a card, nothing wider than the window.
        page.set_viewport_size(NARROW)
        expect(delivery).to_contain_text("delivered")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= NARROW["width"]
        screenshot(page, screenshots, "webhooks-narrow")
        page.set_viewport_size(WIDE)

        # Back to the keys; forgetting the key leaves the view too.
        page.get_by_role("button", name="Back to keys").click()
        expect(open_webhooks).to_be_focused()
        open_webhooks.click()
        expect(page.get_by_role("heading", name="Recent deliveries")).to_be_hidden()
        page.get_by_role("button", name="Forget key").click()
        expect(page.get_by_role("heading", name="Webhooks")).to_be_hidden()
        expect(page.get_by_label("API key")).to_be_focused()
    finally:
        receiver.stop()


def test_an_older_deliveries_answer_arriving_last_is_not_shown(tab, server, org):
    """One endpoint's deliveries asked for, then another's, quickly: the first answer, held
    back until the second's has arrived, must not show under the second's address."""
    from tests.receivers import start_receiver

    receiver = start_receiver()
    try:
        body = {"url": receiver.url, "events": ["key.created"]}
        busy = server.request("POST", "/api/webhooks", org.sdk, body)
        assert busy.status == 201, busy.body
        busy_id = busy.json()["id"]
        make_key(server, org.sdk, "Nightly")
        wait_for_delivery(server, org.sdk, busy_id, status="delivered")
        quiet = server.request(
            "POST",
            "/api/webhooks",
            org.sdk,
            {"url": receiver.url + "quiet", "events": ["key.created"]},
        )
        assert quiet.status == 201, quiet.body
        page = tab.page
        use_key(page, org.sdk)
        page.get_by_role("button", name="Webhooks").click()
        release = held_back(
            page,
            f"**/api/webhooks/{busy_id}/deliveries*",
            lambda: page.get_by_role(
                "button", name=f"Deliveries of {receiver.url}", exact=True
            ).click(),
        )
        page.get_by_role("button", name=f"Deliveries of {receiver.url}quiet").click()
        expect(page.get_by_text("No deliveries yet.")).to_be_visible()
        release()
        expect(page.get_by_text("No deliveries yet.")).to_be_visible()
        expect(page.get_by_text("0 most recent of 0 deliveries")).to_be_visible()
        deliveries = page.get_by_role("table", name="Recent deliveries")
        expect(deliveries.get_by_text("Nightly")).to_have_count(0)
    finally:
        receiver.stop()


def test_webhooks_are_offered_only_to_an_sdk_integration_key(tab, server, org):
    everything = read_key(server, org.sdk, identifier(org.sdk))["scopes"]
    mine = make_key(server, org.sdk, "Everything", everything)
    page = tab.page
    use_key(page, mine["key"])
    button = page.get_by_role("button", name="Webhooks")
    expect(button).to_be_disabled()
    why = "Webhooks: only an sdk_integration key may manage them."
    expect(button).to_have_accessible_description(why)
    expect(page.get_by_text(why)).to_be_visible()


@NEEDS_AXE
@pytest.mark.parametrize("size", [{"width": 1280, "height": 900}, NARROW], ids=["1280px", "390px"])
def test_webhooks_view_passes_axe_wcag_2_a_and_aa(tab, server, org, size):
    from tests.receivers import start_receiver

    receiver = start_receiver()
    try:
        made = server.request(
            "POST", "/api/webhooks", org.sdk, {"url": receiver.url, "events": ["key.created"]}
        )
        assert made.status == 201, made.body
        make_key(server, org.sdk, "Nightly")
        wait_for_delivery(server, org.sdk, made.json()["id"], status="delivered")
        page = tab.page
        page.set_viewport_size(size)
        use_key(page, org.sdk)
        page.get_by_role("button", name="Webhooks").click()
        page.get_by_role("button", name=f"Deliveries of {receiver.url}").click()
        expect(page.get_by_text("1 most recent of 1 delivery")).to_be_visible()
        expect(page.locator('[aria-busy="true"]')).to_have_count(0)
        page.evaluate(AXE.read_text())
        found = page.evaluate(
            "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})"
            ".then(result => result.violations.map("
            "v => `${v.id}: ${v.help} (${v.nodes.map(n => n.target.join(' ')).join(', ')})`))",
            WCAG,
        )
        assert found == []
    finally:
        receiver.stop()


# --- quotas -------------------------------------------------------------------------------------


def test_create_and_edit_set_a_quota_and_the_list_says_what_is_left(tab, server, org, screenshots):
    page = tab.page
    use_key(page, org.sdk)
    posted, put = sent_bodies(page, "POST"), sent_bodies(page, "PUT")
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    requests = form.get_by_label("Quota requests", exact=True)
    period = form.get_by_label("Quota period", exact=True)
    expect(requests).to_have_value("")
    expect(requests).to_have_accessible_description(
        re.compile(r"UTC day.*Quota requests empty: no quota, unless the organization's policy")
    )
    form.get_by_label("Name", exact=True).fill("Partner trial")
    form.get_by_role("checkbox", name="monitor:read", exact=True).check()
    requests.fill("1000")
    period.select_option(label="Day")
    form.locator("#quota-hint").scroll_into_view_if_needed()
    screenshot(page, screenshots, "create-quota")
    form.get_by_role("button", name="Create").click()
    created = dialog(page, "Key created")
    trial = created.get_by_role("textbox", name="New key").input_value()
    close_new_key(page)
    assert posted[-1] == {
        "name": "Partner trial",
        "kind": "custom",
        "scopes": ["monitor:read"],
        "quota": {"requests": 1000, "period": "day"},
    }
    expect(row(page, "Partner trial")).to_contain_text("1,000 of 1,000 uses left today")
    assert read_key(server, org.sdk, identifier(trial))["quota"] == {
        "requests": 1000,
        "period": "day",
    }

    # What is left after some uses, in the list and in the key's usage view; the same words
    # for eyes and for screen readers (text, no picture of it).
    use(server, trial, 3)
    page.get_by_label("Filter by kind", exact=True).select_option("custom")
    left = row(page, "Partner trial").locator(".policy")
    expect(left).to_have_text("997 of 1,000 uses left today")
    expect(left).not_to_have_attribute("aria-hidden", "true")
    use(server, trial, 2)  # since the list was read: the usage view reads the key again
    row(page, "Partner trial").get_by_role("button", name="Usage").click()
    view = page.get_by_role("region", name="Usage of Partner trial")
    expect(view.get_by_role("heading", name="Quota", exact=True)).to_be_visible()
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).replace(hour=0, minute=0, second=0)
    renewed = view.locator("#usage-quota time")
    expect(view.locator("#usage-quota")).to_have_text(
        re.compile(r"^995 of 1,000 uses left today \(a quota of 1,000 a day, renewed .+\)\.$")
    )
    expect(renewed).to_have_attribute("datetime", tomorrow.strftime("%Y-%m-%dT00:00:00.000Z"))
    expect(renewed).to_contain_text(shown_time(tomorrow.isoformat()))
    screenshot(page, screenshots, "usage-quota")
    page.set_viewport_size(NARROW)
    view.get_by_role("form", name="Grant uses").scroll_into_view_if_needed()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= NARROW["width"]
    screenshot(page, screenshots, "usage-quota-narrow")
    page.set_viewport_size(WIDE)

    # Grants: more uses in this period, or exactly so many left; what the page cannot send
    # (no number) it says itself.
    grant = view.get_by_label("Uses to grant", exact=True)
    expect(grant).to_have_accessible_description(re.compile(r"^For the current period only"))
    tab.expect_refusal(422)
    sent = len(posted)
    view.get_by_role("button", name="Add uses").click()
    expect(grant).to_have_accessible_description(
        re.compile(r"^Uses to grant: Give a whole number of uses\.")
    )
    expect(view.get_by_role("form", name="Grant uses").get_by_role("alert")).to_have_text(
        "The request is not valid: Uses to grant."
    )
    expect(grant).to_be_focused()
    assert len(posted) == sent  # the page's own refusal: nothing sent
    grant.fill("0")
    view.get_by_role("button", name="Add uses").click()
    expect(grant).to_have_accessible_description(re.compile(r"^Uses to grant: Must be"))
    grant.fill("5")
    view.get_by_role("button", name="Add uses").click()
    expect(view.locator("#usage-quota")).to_have_text(
        re.compile(r"^1,000 of 1,000 uses left today")
    )
    expect(view.get_by_role("status")).to_have_text("Quota: 1,000 of 1,000 uses left today.")
    expect(grant).not_to_have_attribute("aria-invalid", "true")
    assert posted[-1] == {"add": 5}
    grant.fill("10")
    view.get_by_role("button", name="Set uses left").click()
    expect(view.locator("#usage-quota")).to_have_text(re.compile(r"^10 of 1,000 uses left today"))
    assert posted[-1] == {"set_remaining": 10}
    assert read_key(server, org.sdk, identifier(trial))["quota_remaining"] == 10
    page.get_by_role("button", name="Back to keys").click()
    expect(row(page, "Partner trial")).to_contain_text("10 of 1,000 uses left today")
    use(server, trial, 3)
    page.get_by_label("Filter by kind", exact=True).select_option("")
    expect(row(page, "Partner trial")).to_contain_text("7 of 1,000 uses left today")

    # Edit shows the quota, changes its period, then removes it; only what changed is sent.
    row(page, "Partner trial").get_by_role("button", name="Edit").click()
    edit = dialog(page, "Edit key")
    expect(edit.get_by_label("Quota requests", exact=True)).to_have_value("1000")
    expect(edit.get_by_label("Quota period", exact=True)).to_have_value("day")
    edit.get_by_label("Quota period", exact=True).select_option(label="Week")
    edit.get_by_role("button", name="Save").click()
    expect(edit).to_be_hidden()
    assert put[-1] == {"quota": {"requests": 1000, "period": "week"}}
    # Changing the quota keeps what the key used in the period.
    expect(row(page, "Partner trial")).to_contain_text("7 of 1,000 uses left this week")
    row(page, "Partner trial").get_by_role("button", name="Edit").click()
    edit.get_by_label("Name", exact=True).fill("Partner")
    edit.get_by_role("button", name="Save").click()
    expect(edit).to_be_hidden()
    assert put[-1] == {"name": "Partner"}  # the quota unchanged: not sent
    row(page, "Partner").get_by_role("button", name="Edit").click()
    edit.get_by_label("Quota requests", exact=True).fill("")
    edit.get_by_role("button", name="Save").click()
    expect(edit).to_be_hidden()
    assert put[-1] == {"quota": None}
    expect(row(page, "Partner")).not_to_contain_text("uses left")
    stored = read_key(server, org.sdk, identifier(trial))
    assert (stored["quota"], stored["quota_remaining"]) == (None, None)
    row(page, "Partner").get_by_role("button", name="Usage").click()
    expect(page.locator("#usage-quota")).to_have_text("This key has no quota.")


def test_a_quota_refused_is_said_at_its_inputs(tab, server, org):
    """A quota beyond the key in use's (403 exceeds_caller naming quota) and one the API
    finds invalid (422): said in the form's words, the Quota inputs marked."""
    mine = make_key(
        server,
        org.sdk,
        "Metered",
        ["monitor:read"],
        quota={"requests": 50, "period": "month"},
    )
    page = tab.page
    use_key(page, mine["key"])
    tab.expect_refusal(403, 422)
    posted = sent_bodies(page, "POST")
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    requests = form.get_by_label("Quota requests", exact=True)
    period = form.get_by_label("Quota period", exact=True)
    expect(requests).to_have_accessible_description(
        re.compile(
            r"The key in use has a quota of 50 a month: a quota given must have the same "
            r"period \(Month\) and at most 50 requests; empty gives the new key the same"
        )
    )
    form.get_by_label("Name", exact=True).fill("More than mine")
    form.get_by_role("checkbox", name="monitor:read", exact=True).check()
    requests.fill("80")
    period.select_option(label="Month")
    form.get_by_role("button", name="Create").click()
    summary = form.get_by_role("alert")
    said = (
        "The calling key has a quota of 50 uses per month: a key it makes or changes must "
        "have a quota of the same period, with no more uses."
    )
    expect(summary).to_have_text(said)
    for control in (requests, period):
        expect(control).to_have_attribute("aria-invalid", "true")
        expect(control).to_have_accessible_description(re.compile(f"^{re.escape(said)} "))
    expect(form.get_by_text(said)).to_have_count(1)

    requests.fill("0")
    form.get_by_role("button", name="Create").click()
    expect(summary).to_have_text("The request is not valid: Quota.")
    expect(requests).to_have_attribute("aria-invalid", "true")
    expect(requests).to_have_accessible_description(re.compile(r"^Quota requests: Must be"))
    expect(period).not_to_have_attribute("aria-invalid", "true")
    expect(requests).to_be_focused()
    assert "Item " not in form.inner_text()

    # Empty: the new key takes the key in use's quota.
    requests.fill("")
    form.get_by_role("button", name="Create").click()
    close_new_key(page)
    assert "quota" not in posted[-1]
    listed = server.request("GET", "/api/keys?page_size=200", org.sdk).json()["data"]
    [made] = [key for key in listed if key["name"] == "More than mine"]
    expect(row(page, "More than mine")).to_contain_text(
        f"{made['quota_remaining']} of 50 uses left this month"
    )
    # Removing the quota of a key made by the key in use: refused, said the same way.
    row(page, "More than mine").get_by_role("button", name="Edit").click()
    edit = dialog(page, "Edit key")
    expect(edit.get_by_label("Quota requests", exact=True)).to_have_accessible_description(
        re.compile(r"and at most 50 requests, and empty is refused\.")
    )
    edit.get_by_label("Quota requests", exact=True).fill("")
    edit.get_by_role("button", name="Save").click()
    expect(edit.get_by_role("alert")).to_have_text(said)
    expect(edit.get_by_label("Quota requests", exact=True)).to_have_attribute(
        "aria-invalid", "true"
    )
    edit.get_by_role("button", name="Cancel").click()

    # A grant needs power over the key, as Edit does: offered disabled, saying why.
    wide = make_key(
        server,
        org.sdk,
        "Wider",
        ["monitor:read", "site:read"],
        quota={"requests": 10, "period": "lifetime"},
    )
    page.get_by_label("Filter by kind", exact=True).select_option("custom")
    row(page, "Wider").get_by_role("button", name="Usage").click()
    view = page.get_by_role("region", name="Usage of Wider")
    expect(view.locator("#usage-quota")).to_have_text(
        "10 of 10 uses left for its lifetime (a quota of 10 for its lifetime, never renewed)."
    )
    for name in ("Add uses", "Set uses left"):
        button = view.get_by_role("button", name=name)
        expect(button).to_be_disabled()
        expect(button).to_have_accessible_description(
            re.compile(r"Not offered: it holds scopes the key in use lacks: site:read\.$")
        )
    assert read_key(server, org.sdk, identifier(wide["key"]))["quota_remaining"] == 10


def test_a_key_in_use_past_its_quota_still_reads_its_keys(tab, server, org):
    """Managing keys spends no quota: a key in use whose quota its checks used up still
    lists its keys and reads their usage in the page, its own row saying none is left."""
    mine = make_key(
        server, org.sdk, "Two uses", ["monitor:read"], quota={"requests": 2, "period": "lifetime"}
    )
    checks = [server.request("GET", "/api/forward-auth", mine["key"]).status for _ in range(3)]
    assert checks == [204, 204, 429]
    page = tab.page
    use_key(page, mine["key"])
    expect(row(page, "Two uses")).to_contain_text("0 of 2 uses left for its lifetime")
    expect(cell(page, "Two uses", "Usage")).not_to_contain_text("Usage not read")
    spent = page.get_by_role("alert").filter(has_text=policy.LIFETIME_QUOTA_SPENT)
    expect(spent).to_have_count(0)
    assert read_key(server, org.sdk, identifier(mine["key"]))["quota_remaining"] == 0


# --- identities and import --------------------------------------------------------------------


def identity_row(page: Page, external_id: str):
    """The row of the identity `external_id` in the identities view."""
    return page.locator("#identity-rows tr").filter(has=page.get_by_text(external_id, exact=True))


def wait_for_identity_usage(server: Server, key: str, identity: str, requests: int) -> dict:
    deadline = datetime.now(UTC) + timedelta(seconds=10)
    while True:
        usage = server.request("GET", f"/api/identities/{identity}/usage", key).json()
        total = usage["total"]
        if total["allowed"] + sum(total["refused"].values()) >= requests:
            return usage
        assert datetime.now(UTC) < deadline, usage
        time.sleep(0.1)


def test_identities_are_made_edited_shown_with_their_keys_and_usage_and_deleted(
    tab, server, org, screenshots
):
    page = tab.page
    use_key(page, org.sdk)
    page.get_by_role("button", name="Identities").click()
    expect(page.get_by_role("heading", name="Identities")).to_be_focused()
    expect(page.get_by_text("No identities yet.")).to_be_visible()

    page.get_by_role("button", name="New identity").click()
    form = dialog(page, "New identity")
    form.get_by_label("External id").fill("customer-42")
    form.get_by_label("Name", exact=True).fill("Customer 42")
    form.get_by_label("Requests", exact=True).fill("10")
    form.get_by_label("Per seconds").fill("60")
    form.get_by_label("Quota requests").fill("5")
    form.get_by_label("Quota period").select_option("day")
    form.get_by_role("button", name="Save").click()
    expect(form).to_be_hidden()
    made = identity_row(page, "customer-42")
    expect(made).to_contain_text("Customer 42")
    expect(made).to_contain_text("10 uses per minute · 5 uses a day")
    expect(made).to_contain_text("5 of 5 uses left today")
    expect(made).to_contain_text("0 keys")

    # The same external id again: the API's refusal, in its words.
    tab.expect_refusal(409)
    page.get_by_role("button", name="New identity").click()
    form.get_by_label("External id").fill("customer-42")
    form.get_by_label("Name").fill("Again")
    form.get_by_role("button", name="Save").click()
    expect(form.get_by_role("alert")).not_to_be_empty()
    form.get_by_role("button", name="Cancel").click()

    page.get_by_role("button", name="Edit customer-42").click()
    form = dialog(page, "Edit identity")
    expect(form.get_by_label("Name")).to_have_value("Customer 42")
    form.get_by_label("Name").fill("Acme")
    form.get_by_label("Requests", exact=True).fill("")
    form.get_by_label("Per seconds").fill("")
    form.get_by_role("button", name="Save").click()
    expect(form).to_be_hidden()
    expect(made).to_contain_text("Acme")
    expect(made.get_by_role("cell").nth(2)).to_have_text("5 uses a day")

    identity = server.request("GET", "/api/identities/external_id:customer-42", org.sdk).json()
    assert identity["name"] == "Acme" and identity["rate_limit"] is None
    held = make_key(server, org.sdk, "Acme's key", identity="customer-42")
    use(server, held["key"], 2)
    wait_for_identity_usage(server, org.sdk, identity["id"], 2)

    # The key list says whose the key is, and so does its Edit dialog.
    page.get_by_role("button", name="Back to keys").click()
    expect(row(page, "Acme's key")).to_contain_text("identity customer-42")
    row(page, "Acme's key").get_by_role("button", name="Edit").click()
    edit = dialog(page, "Edit key")
    expect(edit).to_contain_text("identity customer-42")
    edit.get_by_role("button", name="Cancel").click()
    row(page, "Acme's key").get_by_role("button", name="Delete").click()
    confirm = dialog(page, "Delete this key?")
    expect(confirm).to_have_accessible_description(re.compile(r", identity customer-42\)"))
    confirm.get_by_role("button", name="Cancel").click()

    page.get_by_role("button", name="Identities").click()
    expect(made).to_contain_text("1 key")
    page.get_by_role("button", name="Keys and usage of customer-42").click()
    detail = page.locator("#identity-detail")
    expect(page.get_by_role("heading", name="Keys and usage of customer-42")).to_be_focused()
    expect(page.get_by_role("table", name="Keys and usage of customer-42")).to_contain_text(
        "Acme's key"
    )
    expect(detail).to_contain_text("its keys were used 2 times: 2 allowed and 0 refused.")
    screenshot(page, screenshots, "identities")

    # Deleting an identity that still holds a key: the API's 409, in words.
    tab.expect_refusal(409)
    page.get_by_role("button", name="Delete customer-42").click()
    confirm = dialog(page, "Delete this identity?")
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    confirm.get_by_role("button", name="Delete identity").click()
    expect(confirm.get_by_role("alert")).to_have_text(
        "This identity still holds 1 key: delete them or move them to another identity first."
    )
    confirm.get_by_role("button", name="Cancel").click()
    deleted = server.request("DELETE", f"/api/keys/{identifier(held['key'])}", org.sdk)
    assert deleted.status == 204
    page.get_by_role("button", name="Delete customer-42").click()
    confirm.get_by_role("button", name="Delete identity").click()
    expect(confirm).to_be_hidden()
    expect(page.get_by_text("No identities yet.")).to_be_visible()
    assert server.request("GET", f"/api/identities/{identity['id']}", org.sdk).status == 404


def test_new_key_lets_an_sdk_integration_key_choose_an_identity(tab, server, org):
    made = server.request(
        "POST", "/api/identities", org.sdk, {"external_id": "customer-7", "name": "Seven"}
    )
    assert made.status == 201, made.body
    page = tab.page
    use_key(page, org.sdk)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    choice = form.get_by_label("Identity", exact=True)
    expect(choice).to_be_visible()
    choice.select_option(label="customer-7 (Seven)")
    form.get_by_label("Name").fill("Seven's key")
    scope_boxes(form).first.check()
    form.get_by_role("button", name="Create").click()
    close_new_key(page)
    expect(row(page, "Seven's key")).to_contain_text("identity customer-7")
    shown = row(page, "Seven's key").locator("code.shown").text_content()
    assert read_key(server, org.sdk, shown.removesuffix("..."))["identity"] == {
        "id": made.json()["id"],
        "external_id": "customer-7",
    }


def test_identities_and_import_are_offered_only_to_an_sdk_integration_key(tab, server, org):
    everything = read_key(server, org.sdk, identifier(org.sdk))["scopes"]
    mine = make_key(server, org.sdk, "Everything", everything)
    page = tab.page
    use_key(page, mine["key"])
    for name, why in (
        ("Identities", "Identities: only an sdk_integration key may manage them."),
        ("Import", "Import: only an sdk_integration key may import keys."),
    ):
        button = page.get_by_role("button", name=name, exact=True)
        expect(button).to_be_disabled()
        expect(button).to_have_accessible_description(why)
        expect(page.get_by_text(why)).to_be_visible()
    page.get_by_role("button", name="New key").click()
    expect(dialog(page, "Create a key").get_by_label("Identity", exact=True)).to_be_hidden()


def jsonl(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_import_previews_a_file_line_by_line_then_sends_it(tab, server, org, tmp_path, screenshots):
    first, second = "imported-" + "a" * 24, "imported-" + "b" * 24
    keys = jsonl(
        tmp_path / "keys.jsonl",
        json.dumps(
            {"key": first, "name": "Imported one", "kind": "custom", "scopes": ["monitor:read"]}
        ),
        json.dumps(
            {"key": second, "name": "Imported two", "kind": "custom", "scopes": ["monitor:read"]}
        ),
        "{not json",
        json.dumps({"name": "No key", "kind": "custom"}),
    )
    page = tab.page
    use_key(page, org.sdk)
    page.get_by_role("button", name="Import", exact=True).click()
    form = dialog(page, "Import keys")
    send = form.get_by_role("button", name="Import", exact=True)
    expect(send).to_be_disabled()
    form.get_by_label("Keys file (JSON lines)").set_input_files(keys)
    expect(form.get_by_role("status")).to_have_text(
        "2 keys will be made from keys.jsonl. 2 lines are refused and will not be sent:"
    )
    expect(form.get_by_role("list", name="Lines refused").get_by_role("listitem")).to_have_text(
        ["Line 3: not JSON", "Line 4: has neither key nor key_sha256"]
    )
    screenshot(page, screenshots, "import")
    send.click()
    expect(form).to_be_hidden()
    expect(page.get_by_text("Made 2 keys.")).to_be_visible()
    expect(row(page, "Imported one")).to_have_count(1)
    expect(row(page, "Imported two")).to_have_count(1)
    answer = server.request("GET", "/api/forward-auth?scope=monitor:read", first)
    assert answer.status == 204

    # The same keys again: the API's 409, naming the file's lines.
    tab.expect_refusal(409, 422)
    page.get_by_role("button", name="Import", exact=True).click()
    form.get_by_label("Keys file (JSON lines)").set_input_files(keys)
    send.click()
    alert = form.get_by_role("alert")
    expect(alert).to_contain_text("The service already knows line 1, line 2: nothing was imported.")
    expect(alert).to_contain_text("Line 1: This key is already known to the service.")

    # An entry the API refuses: its line and field, in the API's words.
    bad = jsonl(
        tmp_path / "bad.jsonl",
        "",
        json.dumps({"key": "imported-" + "c" * 24, "name": "Bad", "kind": "nonsense"}),
    )
    form.get_by_label("Keys file (JSON lines)").set_input_files(bad)
    expect(form.get_by_role("status")).to_have_text("1 key will be made from bad.jsonl.")
    send.click()
    expect(alert).to_contain_text("Line 2, kind: ")
    assert server.request("GET", "/api/keys?page_size=200", org.sdk).json()["total_count"] == 4

    many = jsonl(tmp_path / "many.jsonl", *[json.dumps({"key": f"k{n:020}"}) for n in range(1001)])
    form.get_by_label("Keys file (JSON lines)").set_input_files(many)
    expect(form.get_by_role("status")).to_have_text(
        "Too many lines: 1,001 keys in the file, and one import takes at most 1,000. "
        "Split the file and import each part."
    )
    expect(send).to_be_disabled()


@NEEDS_AXE
@pytest.mark.parametrize("size", [{"width": 1280, "height": 900}, NARROW], ids=["1280px", "390px"])
def test_identities_and_import_pass_axe_wcag_2_a_and_aa(
    tab, server, org, size, tmp_path, screenshots
):
    made = server.request(
        "POST",
        "/api/identities",
        org.sdk,
        {"external_id": "customer-9", "name": "Nine", "quota": {"requests": 9, "period": "day"}},
    )
    assert made.status == 201, made.body
    make_key(server, org.sdk, "Nine's key", identity="customer-9")
    page = tab.page
    page.set_viewport_size(size)
    use_key(page, org.sdk)
    source = AXE.read_text()
    violations = {}

    def check(view: str) -> None:
        expect(page.locator('[aria-busy="true"]')).to_have_count(0)
        if not page.evaluate("typeof axe !== 'undefined'"):
            page.evaluate(source)
        found = page.evaluate(
            "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})"
            ".then(result => result.violations.map("
            "v => `${v.id}: ${v.help} (${v.nodes.map(n => n.target.join(' ')).join(', ')})`))",
            WCAG,
        )
        if found:
            violations[view] = found

    page.get_by_role("button", name="Identities").click()
    expect(identity_row(page, "customer-9")).to_contain_text("1 key")
    page.get_by_role("button", name="Keys and usage of customer-9").click()
    expect(page.locator("#identity-usage")).not_to_be_empty()
    check("identities")
    if size == NARROW:
        screenshot(page, screenshots, "identities-narrow")
    page.get_by_role("button", name="Edit customer-9").click()
    check("edit identity")
    dialog(page, "Edit identity").get_by_role("button", name="Cancel").click()
    tab.expect_refusal(409)
    page.get_by_role("button", name="Delete customer-9").click()
    dialog(page, "Delete this identity?").get_by_role("button", name="Delete identity").click()
    expect(dialog(page, "Delete this identity?").get_by_role("alert")).not_to_be_empty()
    check("delete identity, refused")
    dialog(page, "Delete this identity?").get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name="Back to keys").click()
    page.get_by_role("button", name="Import", exact=True).click()
    keys = jsonl(tmp_path / "keys.jsonl", json.dumps({"key": "x" * 20}), "nope")
    dialog(page, "Import keys").get_by_label("Keys file (JSON lines)").set_input_files(keys)
    expect(dialog(page, "Import keys").get_by_role("status")).not_to_be_empty()
    check("import preview")
    assert violations == {}


def test_an_identitys_field_errors_stand_under_their_inputs_by_their_labels(tab, server, org):
    page = tab.page
    use_key(page, org.sdk)
    page.get_by_role("button", name="Identities").click()
    page.get_by_role("button", name="New identity").click()
    form = dialog(page, "New identity")
    tab.expect_refusal(422)
    form.get_by_label("External id").fill(" spaced ")
    form.get_by_label("Name", exact=True).fill("Spaced")
    form.get_by_label("Requests", exact=True).fill("0")
    form.get_by_label("Per seconds").fill("60")
    form.get_by_role("button", name="Save").click()
    expect(form.get_by_role("alert")).to_have_text(
        "The request is not valid: External id, Rate limit."
    )
    external = form.get_by_label("External id")
    expect(external).to_be_focused()
    expect(external).to_have_attribute("aria-invalid", "true")
    expect(external).to_have_accessible_description(re.compile(r"^External id: Must be printable"))
    expect(form.locator("#identity-rate-error")).to_contain_text("Requests: ")

    # Half a rate limit is the page's own refusal: nothing is sent.
    form.get_by_label("External id").fill("customer-1")
    form.get_by_label("Per seconds").fill("")
    form.get_by_role("button", name="Save").click()
    expect(form.locator("#identity-rate-error")).to_have_text(
        "Rate limit: Give both Requests and Per seconds, or neither."
    )
    listed = server.request("GET", "/api/identities", org.sdk).json()
    assert listed["total_count"] == 0


def test_identity_events_read_in_words_in_the_audit_log_and_the_deliveries(tab, server, org):
    """An identity's events (issue 53): the deliveries list them beside the keys' (its name
    where a key's stands), the audit log says an identity's limits and metadata in words and
    names it, names the key that made a webhook endpoint, and at 390 px neither view
    scrolls sideways. The tab checks that the console showed no error."""
    from tests.receivers import start_receiver

    receiver = start_receiver()
    try:
        body = {"url": receiver.url, "events": ["key.created", "identity.quota_exhausted"]}
        made = server.request("POST", "/api/webhooks", org.sdk, body)
        assert made.status == 201, made.body
        endpoint = made.json()
        identity = {
            "external_id": "team/backend-" + "x" * 60,
            "name": "Backend team",
            "metadata": {"plan": "pro"},
            "rate_limit": {"requests": 100, "seconds": 60},
            "quota": {"requests": 1, "period": "day"},
        }
        held = server.request("POST", "/api/identities", org.sdk, identity)
        assert held.status == 201, held.body
        holder = held.json()
        change = {"quota": {"requests": 2, "period": "day"}, "metadata": {"plan": "max"}}
        path = f"/api/identities/{holder['id']}"
        assert server.request("PUT", path, org.sdk, change).status == 200
        member = make_key(server, org.sdk, "Backend CI", identity=holder["id"])
        for _ in range(2):
            assert server.request("GET", "/api/forward-auth", member["key"]).status == 204
        wait_for_delivery(server, org.sdk, endpoint["id"], status="delivered")
        deadline = time.monotonic() + 15
        while len(receiver.received) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)

        page = tab.page
        use_key(page, org.sdk)
        page.get_by_role("button", name="Audit log").click()
        table = page.get_by_role("table", name="Audit log")
        expect(table.get_by_role("row").filter(has_text="Backend team").first).to_be_visible()

        def event(words: str):
            return table.get_by_role("row").filter(has=page.get_by_text(words, exact=True))

        created = event(ACTION_WORDS["identity.created"])
        expect(created.get_by_role("cell").nth(3)).to_have_text(
            f"Identity Backend team ({holder['id']})"
        )
        expect(created.get_by_role("listitem")).to_have_text(
            [
                f"External id: {identity['external_id']}",
                "Name: Backend team",
                "Metadata: plan=pro",
                "Rate limit: 100 per 60 s",
                "Quota: 1 a day",
            ]
        )
        expect(event(ACTION_WORDS["identity.updated"]).get_by_role("listitem")).to_have_text(
            ["Metadata: plan=pro → plan=max", "Quota: 1 a day → 2 a day"]
        )
        expect(event(ACTION_WORDS["identity.quota_exhausted"])).to_contain_text(
            "Every use of its quota of 2 a day spent"
        )
        webhook = event(ACTION_WORDS["webhook.created"])
        expect(webhook.get_by_role("cell").nth(2)).to_have_text(
            f"SDK Integration ({identifier(org.sdk)}...)"
        )
        assert "[object Object]" not in table.inner_text()
        page.set_viewport_size(NARROW)
        expect(created).to_be_visible()
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth"), (
            "the audit log scrolls sideways at 390 px"
        )
        page.set_viewport_size(WIDE)

        page.get_by_role("button", name="Back to keys").click()
        page.get_by_role("button", name="Webhooks").click()
        endpoints = page.get_by_role("table", name="Endpoints")
        listed = endpoints.get_by_role("row").filter(has=page.get_by_text(receiver.url))
        listed.get_by_role("button", name=f"Deliveries of {receiver.url}").click()
        deliveries = page.get_by_role("table", name="Recent deliveries")
        expect(deliveries.get_by_role("columnheader").nth(2)).to_have_text("About")
        quota = deliveries.get_by_role("row").filter(has_text="Identity Backend team")
        expect(quota).to_contain_text(EVENT_WORDS["identity.quota_exhausted"])
        expect(deliveries.get_by_role("row").filter(has_text="Backend CI")).to_contain_text(
            EVENT_WORDS["key.created"]
        )
        page.set_viewport_size(NARROW)
        expect(quota).to_be_visible()
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
        page.set_viewport_size(WIDE)
    finally:
        receiver.stop()
