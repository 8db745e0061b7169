"""The page at / in a real Chromium, on a real gunicorn (contract sections 14 and 18): a
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from app.keyformat import new_key
from tests.processes import PROJECT
from tests.server.conftest import Server, launch, stop

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is a dev dependency: make install"
)
Page, expect = sync_api.Page, sync_api.expect

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
    server = launch(tmp_path_factory.mktemp("page") / "server", workers=2)
    try:
        server.wait_until_ready(2)
        yield server
    finally:
        stop(server)


@pytest.fixture(scope="session")
def browser() -> Iterator:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


@dataclass
class Org:
    """A fresh organization and its two keys, full values."""

    name: str
    sdk: str
    telemetry: str


@pytest.fixture
def org(server, request) -> Org:
    name = re.sub(r"\W", "-", request.node.name)[:60]
    made = server.flask("org", "create", name, "--json")
    keys = {key["kind"]: key["key"] for key in json.loads(made.stdout)["keys"]}
    return Org(name, keys["sdk_integration"], keys["telemetry"])


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
    page.set_default_timeout(5000)
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
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Use key").click()
    expect(page.get_by_role("heading", name="Keys of your organization")).to_be_visible()
    expect(page.get_by_text(PAGE_STATUS)).to_be_visible()  # the list is in


def row(page: Page, name: str):
    """The table row of the key with this name."""
    return page.get_by_role("row").filter(has=page.get_by_text(name, exact=True))


def names_listed(page: Page) -> list[str]:
    return page.locator("#rows .key-name").all_text_contents()


def dialog(page: Page, title: str):
    return page.get_by_role("dialog", name=title)


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
    expect(page.get_by_label("API key")).to_be_focused()
    expect(page.get_by_label("API key")).to_have_attribute("type", "password")
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
    expect(other.get_by_label("API key")).to_be_visible()
    assert other.evaluate("() => sessionStorage.length") == 0
    other.context.close()

    page.get_by_role("button", name="Forget key").click()
    expect(page.get_by_label("API key")).to_be_focused()
    assert page.evaluate("() => sessionStorage.length") == 0


def test_create_shows_the_full_key_once_with_a_copy_button(tab, server, org, screenshots):
    page = tab.page
    use_key(page, org.sdk)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    form.get_by_label("Name", exact=True).fill("CI deploys (production)")
    expect(form.get_by_label("Kind", exact=True)).to_have_value("custom")
    boxes = form.get_by_role("checkbox")
    expect(boxes).to_have_count(11)  # an sdk_integration key holds every scope
    form.get_by_role("checkbox", name="monitor:read", exact=True).check()
    form.get_by_role("checkbox", name="monitor:write", exact=True).check()
    # (ICU still spells Kathmandu the old way.)
    expect(form).to_contain_text(re.compile(r"In your time zone \(Asia/Kath?mandu\)"))
    form.get_by_label("Expires").fill("2030-01-02T08:49")  # Kathmandu: 03:04 UTC
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
    expect(form.get_by_role("checkbox")).to_have_count(0)
    expect(form).to_contain_text("The scopes of a telemetry key are fixed: monitor:telemetry.")
    form.get_by_label("Name", exact=True).fill("Status page monitor")
    expect(form.get_by_label("Expires")).to_have_value("")
    form.get_by_role("button", name="Create").click()
    expect(dialog(page, "Key created").get_by_role("textbox", name="New key")).to_have_value(
        FULL_KEY
    )
    close_new_key(page)
    expect(cell(page, "Status page monitor", "Kind")).to_have_text("telemetry")
    screenshot(page, screenshots, "list")


def test_refusals_show_in_the_dialog_that_asked(tab, server, org, screenshots):
    narrow = make_key(server, org.sdk, "Monitors only", ["monitor:read", "monitor:write"])
    page = tab.page
    use_key(page, narrow["key"])
    tab.expect_refusal(422)
    page.get_by_role("button", name="New key").click()
    form = dialog(page, "Create a key")
    # Only the scopes the key in use holds are offered.
    boxes = form.get_by_role("checkbox")
    expect(boxes).to_have_count(2)
    assert [box.get_attribute("value") for box in boxes.all()] == ["monitor:read", "monitor:write"]

    # The API, not the page, decides what is valid: a blank name is its 422.
    form.get_by_label("Name", exact=True).fill("   ")
    form.get_by_role("checkbox", name="monitor:read").check()
    form.get_by_role("button", name="Create").click()
    error = form.get_by_role("alert")
    expect(error).to_have_text("The request is not valid: Name.")
    expect(form.get_by_label("Name", exact=True)).to_have_accessible_description(
        "Name: Length must be between 1 and 200."
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
    expect(form.get_by_role("checkbox")).to_have_count(1)


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
    expect(form.get_by_label("Expires")).to_have_value("")
    form.get_by_label("Expires").fill("2031-06-30T23:45")  # Kathmandu: 18:00 UTC
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
    expect(form.get_by_label("Expires")).to_have_value("2031-06-30T23:45")
    form.get_by_role("button", name="No expiry").click()
    expect(form.get_by_label("Expires")).to_have_value("")
    form.get_by_role("button", name="Save").click()
    expect(cell(page, "Deploys (staging)", "Expires")).to_have_text("Never")
    assert read_key(server, org.sdk, stored["key"])["expires_at"] is None

    # A key of a fixed kind: its name changes, its scopes are said, not offered.
    row(page, "Telemetry").get_by_role("button", name="Edit").click()
    expect(form.get_by_role("checkbox")).to_have_count(0)
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
    grace = rotate.get_by_label("Grace period (seconds)")
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
    rotate.get_by_label("Expires").fill("2032-03-04T05:45")  # Kathmandu: 00:00 UTC
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
    page.get_by_label("Filter by kind").select_option("sdk_integration")
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
    expect(rotate.get_by_label("Expires")).to_have_value("2031-01-15T12:00")
    rotate.get_by_role("button", name="No expiry").click()
    expect(line).to_have_text("The new key does not expire.")
    rotate.get_by_label("Expires").fill("2032-03-04T05:45")
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
        expect(rotate.get_by_label("Expires")).to_have_value("")
        rotate.get_by_role("button", name="Cancel").click()


def test_an_expired_key_is_listed_renamed_and_refused_as_the_key_in_use(tab, server, org):
    tab.expect_refusal(401)
    soon = in_seconds(2)
    short = make_key(server, org.sdk, "Short-lived", ["monitor:read"], expires_at=soon)
    page = tab.page
    use_key(page, short["key"])
    expect(cell(page, "Short-lived", "Expires")).not_to_have_text("Never")
    page.wait_for_timeout(2100)

    # Its next request: 401 expired_key, and the person is asked for a key again.
    page.get_by_label("Filter by kind").select_option("custom")
    expect(page.get_by_label("API key")).to_be_focused()
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
    assert renamed["expires_at"] == short["expires_at"]


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
    page.get_by_label("Keys per page").select_option("10")
    expect(page.get_by_text("Page 1 of 2 · 14 keys")).to_be_visible()
    assert len(names_listed(page)) == 10
    expect(page.get_by_role("button", name="Previous page")).to_be_disabled()
    page.get_by_role("button", name="Next page").click()
    expect(page.get_by_text("Page 2 of 2 · 14 keys")).to_be_visible()
    assert names_listed(page) == ["Key 09", "Key 10", "Key 11", "Key 12"]
    expect(page.get_by_role("button", name="Next page")).to_be_disabled()

    page.get_by_label("Filter by kind").select_option("custom")
    expect(page.get_by_text("Page 1 of 2 · 12 keys")).to_be_visible()
    assert names_listed(page)[0] == "Key 01"
    page.get_by_label("Filter by kind").select_option("telemetry")
    expect(page.get_by_text("Page 1 of 1 · 1 key", exact=True)).to_be_visible()
    assert names_listed(page) == ["Telemetry"]

    # Deleting the last key of the last page shows the page before.
    page.get_by_label("Filter by kind").select_option("")
    page.get_by_label("Keys per page").select_option("25")
    page.get_by_label("Keys per page").select_option("10")
    page.get_by_role("button", name="Next page").click()
    for name in ["Key 09", "Key 10", "Key 11", "Key 12"]:
        row(page, name).get_by_role("button", name="Delete").click()
        page.get_by_role("button", name="Delete key").click()
        expect(row(page, name)).to_have_count(0)
    expect(page.get_by_text("Page 1 of 1 · 10 keys")).to_be_visible()


def test_a_refused_key_sends_the_person_back_to_the_key_input(tab, server, org):
    page = tab.page
    tab.expect_refusal(401, 403)
    page.get_by_label("API key").fill("ak_not_a_key")
    page.get_by_role("button", name="Use key").click()
    expect(page.get_by_role("alert")).to_contain_text("This is not a whole API key")
    expect(page.get_by_label("API key")).to_be_focused()

    page.get_by_label("API key").fill(org.telemetry)
    page.get_by_role("button", name="Use key").click()
    expect(page.get_by_role("alert")).to_contain_text("Telemetry keys cannot manage")
    assert page.evaluate("() => sessionStorage.length") == 0

    # A key deleted while in use: the next request is a 401, and the person is asked again.
    spare = make_key(server, org.sdk, "Spare", ["monitor:read"])
    use_key(page, spare["key"])
    assert server.request("DELETE", f"/api/keys/{identifier(spare['key'])}", org.sdk).status == 204
    page.get_by_label("Filter by kind").select_option("custom")
    expect(page.get_by_label("API key")).to_be_focused()
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

    expect(page.get_by_label("API key")).to_be_focused()
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
    expect(page.get_by_label("Grace period (seconds)")).to_be_focused()
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
    tab_to(page.get_by_label("Keys per page"))
    keyboard.press("Home")  # 10 a page
    keyboard.press("ArrowDown")
    keyboard.press("ArrowUp")
    tab_to(page.get_by_label("Filter by kind"))
    keyboard.press("End")  # custom
    expect(page.get_by_text("Page 1 of 1 · 4 keys")).to_be_visible()

    # Forget the key.
    page.get_by_role("heading", name="Keys of your organization").focus()
    keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Forget key")).to_be_focused()
    keyboard.press("Enter")
    expect(page.get_by_label("API key")).to_be_focused()


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
    expect(row(page, "Status").get_by_role("cell")).to_have_count(7)
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


# --- people's rough edges (contract sections 14 and 18) ---------------------------------------


def test_a_mistyped_incomplete_shown_or_unknown_key_says_so(tab, server, org):
    """What was pasted is judged in people's words: a key's shape (and checksum) by the page
    itself, with no request; a well-formed key by the API's answer."""
    page = tab.page
    field = page.get_by_label("API key")
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
    expires = form.get_by_label("Expires")

    name.fill("   ")
    expires.fill("2001-02-03T04:05")  # past
    form.get_by_role("button", name="Create").click()
    summary = form.get_by_role("alert")
    expect(summary).to_have_text("The request is not valid: Name, Expires.")
    expect(name).to_have_attribute("aria-invalid", "true")
    expect(name).to_have_accessible_description(re.compile(r"^Name: Length must be between"))
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
    for box in form.get_by_role("checkbox").all():
        expect(box).to_have_attribute("aria-invalid", "true")
        expect(box).to_have_accessible_description(re.compile(r"^Scopes: A custom key needs"))
    expect(form.get_by_role("checkbox").first).to_be_focused()
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
    grace = rotate.get_by_label("Grace period (seconds)")
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
    expect(page.get_by_label("API key")).to_be_focused()
    expect(page.locator("#sign-in-error")).to_have_text(
        "The key in use was deleted: paste another key to go on."
    )
    expect(page.get_by_role("heading", name="Keys of your organization")).to_be_hidden()
    assert page.evaluate("() => sessionStorage.length") == 0
    assert server.request("GET", "/api/keys", org.sdk).status == 401


def test_controls_fit_the_key_in_use(tab, server, org, screenshots):
    """What the key in use can never do is offered disabled, saying why (contract section 3:
    no key alters a key holding scopes it lacks, nor makes a key beyond its own scopes; and
    section 15: a key that expires makes none that outlives it)."""
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
    expect(form.get_by_label("Expires")).to_have_accessible_description(
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


def open_dialog(page: Page, which: str):
    """Open the dialog `which` (of DIALOGS); it, found by its name."""
    if which == "create":
        page.get_by_role("button", name="New key").click()
        return dialog(page, "Create a key")
    if which == "edit":
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
    make_key(server, org.sdk, "Nightly backups", expires_at="2031-01-15T06:15:30Z")
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


@pytest.mark.skipif(
    not AXE.exists(),
    reason="axe-core is not installed: npm ci --ignore-scripts --prefix tests/server/axe "
    "(.ci/run does)",
)
@pytest.mark.parametrize("size", [{"width": 1280, "height": 900}, {"width": 390, "height": 844}])
def test_every_view_passes_axe_cores_wcag_2_a_and_aa_rules(tab, server, org, size):
    """axe-core (pinned in tests/server/axe) injected into each view, its dialogs and their
    error states: no violation of WCAG 2.0 and 2.1, levels A and AA."""
    make_key(server, org.sdk, "Nightly backups", ["site:read"], expires_at=in_seconds(86400))
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
    page.get_by_label("API key").fill(identifier(org.sdk) + "...")
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
        if which == "rotate":
            shown.get_by_label("Grace period (seconds)").fill("")
            shown.get_by_role("button", name="Rotate key").click()
            expect(shown.get_by_role("alert")).not_to_be_empty()
            check("rotate, field errors")
        close_dialog(page, which, shown)
    assert violations == {}
