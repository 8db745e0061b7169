"""Listing (spec section 4; docs/design.md, "Listing"): the envelope, paging, order and filter."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from app.domain.keyformat import identifier_of
from app.keys import writes
from app.storage import pages
from tests.key_fields import KEY_FIELDS

PROBLEM_JSON = "application/problem+json"
ENVELOPE = {"page", "page_size", "total_count", "data"}
BASE = datetime(2020, 1, 1, 12, 0, 0)


def assert_problem(response, status: int, code: str) -> None:
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == PROBLEM_JSON
    assert response.json["status"] == status
    assert response.json["code"] == code


def listing(client, caller: str, query: str = ""):
    response = client.get(f"/api/keys{query}", auth=(caller, ""))
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.json


def shown(full_key: str) -> str:
    return identifier_of(full_key) + "..."


def sort_key(item: dict) -> tuple[datetime, bytes]:
    """The contract's order: created, then identifier in ascending byte order."""
    created = datetime.fromisoformat(item["created"])
    return created, item["key"].removesuffix("...").encode("ascii")


@pytest.fixture
def clock(monkeypatch):
    """Make keys at chosen times: set `clock.times` to the creation times to hand out; once
    they are handed out, the service's other times (last_used) are the real ones."""
    real = writes.utcnow

    class Clock:
        def __init__(self) -> None:
            self.times: list[datetime] = []

        def __call__(self) -> datetime:
            return self.times.pop(0) if self.times else real()

    fake = Clock()
    monkeypatch.setattr(writes, "utcnow", fake)
    return fake


# --- the envelope and its defaults -------------------------------------------------------


def test_list_is_the_envelope_page_page_size_total_count_data(client, org):
    body = listing(client, org.sdk)
    assert set(body) == ENVELOPE
    assert isinstance(body["data"], list)
    assert all(set(item) == set(KEY_FIELDS) for item in body["data"])


def test_list_defaults_to_page_1_and_page_size_50(client, org):
    body = listing(client, org.sdk)
    assert (body["page"], body["page_size"], body["total_count"]) == (1, 50, 2)
    assert len(body["data"]) == 2


def test_default_page_size_50_holds_50_keys(client, org, make_key):
    for number in range(49):
        make_key(name=f"key {number}")
    first = listing(client, org.sdk)
    second = listing(client, org.sdk, "?page=2")
    assert (first["total_count"], len(first["data"])) == (51, 50)
    assert (second["page"], second["page_size"], len(second["data"])) == (2, 50, 1)


def test_new_organization_lists_its_two_starting_keys(client, org):
    data = listing(client, org.sdk)["data"]
    assert sorted((item["name"], item["kind"]) for item in data) == [
        ("SDK Integration", "sdk_integration"),
        ("Telemetry", "telemetry"),
    ]


# --- page and page_size -------------------------------------------------------------------


@pytest.mark.parametrize("page_size", [1, 2, 199, 200])
def test_page_size_from_1_to_200_is_accepted(client, org, page_size):
    body = listing(client, org.sdk, f"?page_size={page_size}")
    assert (body["page"], body["page_size"], body["total_count"]) == (1, page_size, 2)
    assert len(body["data"]) == min(page_size, 2)


@pytest.mark.parametrize(
    "value", ["0", "201", "-1", "abc", "1.5", "1000", "99999999999999999999999", "2x"]
)
def test_page_size_out_of_range_or_not_a_number_is_422_naming_it(client, org, value):
    response = client.get(f"/api/keys?page_size={value}", auth=(org.sdk, ""))
    assert_problem(response, 422, "validation_error")
    assert "page_size" in response.json["errors"]
    assert "page" not in response.json["errors"]


# 10**18 is past the documented maximum (OpenAPI's `maximum` for page).
@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", "one", str(10**18)])
def test_page_below_1_or_not_a_number_is_422_naming_it(client, org, value):
    response = client.get(f"/api/keys?page={value}", auth=(org.sdk, ""))
    assert_problem(response, 422, "validation_error")
    assert "page" in response.json["errors"]
    assert "page_size" not in response.json["errors"]


def test_both_bad_page_and_page_size_are_named(client, org):
    response = client.get("/api/keys?page=0&page_size=0", auth=(org.sdk, ""))
    assert_problem(response, 422, "validation_error")
    assert {"page", "page_size"} <= set(response.json["errors"])


@pytest.mark.parametrize("page", [2, 3, 1000000, 10**18 - 1])
def test_page_past_the_end_is_empty_with_the_true_total_count(client, org, make_key, page):
    make_key()
    body = listing(client, org.sdk, f"?page={page}&page_size=3")
    assert body == {"page": page, "page_size": 3, "total_count": 3, "data": []}


def test_last_partial_page_holds_the_remainder(client, org, make_key):
    for number in range(3):
        make_key(name=f"key {number}")
    body = listing(client, org.sdk, "?page=3&page_size=2")
    assert (body["page"], body["page_size"], body["total_count"]) == (3, 2, 5)
    assert len(body["data"]) == 1


# --- order ----------------------------------------------------------------------------------


def test_order_is_oldest_first(client, org, make_key, clock):
    clock.times = [BASE + timedelta(seconds=3), BASE + timedelta(seconds=1), BASE]
    for name in ("third", "second", "first"):
        make_key(name=name)
    data = listing(client, org.sdk)["data"]
    # The keys made at 2020 come before the organization's starting keys (made now).
    assert [item["name"] for item in data[:3]] == ["first", "second", "third"]
    assert data == sorted(data, key=sort_key)


def test_order_follows_created_not_insertion(client, org, make_key, clock):
    clock.times = [BASE + timedelta(microseconds=2), BASE + timedelta(microseconds=1)]
    later = make_key(name="inserted first, created later")
    earlier = make_key(name="inserted second, created earlier")
    data = listing(client, org.sdk)["data"]
    assert [item["key"] for item in data[:2]] == [shown(earlier), shown(later)]


def test_ties_in_created_are_broken_by_identifier_in_byte_order(client, org, make_key, clock):
    clock.times = [BASE] * 8
    made = [make_key(name=f"tied {number}") for number in range(8)]
    data = listing(client, org.sdk)["data"]
    tied = [item["key"] for item in data[:8]]
    assert tied == sorted((shown(key) for key in made), key=lambda value: value.encode())
    assert {item["created"] for item in data[:8]} == {"2020-01-01T12:00:00.000000Z"}


def test_order_is_the_same_on_every_request(client, org, make_key, clock):
    clock.times = [BASE] * 5
    for number in range(5):
        make_key(name=f"tied {number}")
    first = [item["key"] for item in listing(client, org.sdk)["data"]]
    for _ in range(3):
        assert [item["key"] for item in listing(client, org.sdk)["data"]] == first


@pytest.fixture(params=["plain", "deep"])
def page_query(request, monkeypatch) -> None:
    """Each page query in turn: the plain one, and the one pages deep in a list use (for
    every page, here)."""
    if request.param == "deep":
        monkeypatch.setattr(pages, "DEEP_OFFSET", 0)


@pytest.mark.parametrize("page_size", [1, 2, 3, 4, 5])
def test_walking_all_pages_yields_each_key_exactly_once_in_order(
    client, org, make_key, clock, page_size, page_query
):
    # Three groups of three keys tied in `created`, and the two starting keys.
    clock.times = [BASE + timedelta(seconds=number // 3) for number in range(9)]
    made = [make_key(name=f"key {number}") for number in range(9)]
    everything = [item["key"] for item in listing(client, org.sdk, "?page_size=200")["data"]]
    walked, page = [], 1
    while True:
        body = listing(client, org.sdk, f"?page={page}&page_size={page_size}")
        assert (body["page"], body["page_size"], body["total_count"]) == (page, page_size, 11)
        if not body["data"]:
            break
        assert len(body["data"]) <= page_size
        walked += [item["key"] for item in body["data"]]
        page += 1
    assert page - 1 == -(-11 // page_size)
    assert walked == everything
    assert len(walked) == len(set(walked)) == 11
    assert {shown(key) for key in made} <= set(walked)


# --- the kind filter ------------------------------------------------------------------------


@pytest.fixture
def mixed(make_key) -> None:
    """Beside the two starting keys: three custom keys and a second telemetry key."""
    for number in range(3):
        make_key(name=f"custom {number}")
    make_key(kind="telemetry", name="second telemetry")


@pytest.mark.parametrize(
    ("kind", "count"), [("custom", 3), ("telemetry", 2), ("sdk_integration", 1)]
)
def test_kind_filters_and_total_count_counts_the_filter(client, org, mixed, kind, count):
    body = listing(client, org.sdk, f"?kind={kind}")
    assert body["total_count"] == count
    assert len(body["data"]) == count
    assert {item["kind"] for item in body["data"]} == {kind}


def test_kind_filter_pages_over_the_filtered_keys(client, org, mixed, page_query):
    body = listing(client, org.sdk, "?kind=custom&page=2&page_size=2")
    assert (body["page"], body["page_size"], body["total_count"]) == (2, 2, 3)
    assert [item["kind"] for item in body["data"]] == ["custom"]


def test_kind_filter_with_no_match_is_empty(client, org):
    assert listing(client, org.sdk, "?kind=custom") == {
        "page": 1,
        "page_size": 50,
        "total_count": 0,
        "data": [],
    }


@pytest.mark.parametrize("kind", ["admin", "Custom", "TELEMETRY", "sdk-integration", "mcp"])
def test_unknown_kind_is_422_naming_kind(client, org, kind):
    response = client.get(f"/api/keys?kind={kind}", auth=(org.sdk, ""))
    assert_problem(response, 422, "validation_error")
    assert "kind" in response.json["errors"]


def test_unfiltered_total_count_counts_every_key(client, org, mixed):
    body = listing(client, org.sdk, "?page_size=1")
    assert (body["total_count"], len(body["data"])) == (6, 1)


# --- what a listed key shows ----------------------------------------------------------------


def test_list_shows_key_as_identifier_and_ellipsis_never_the_full_key(client, org, make_key):
    custom = make_key()
    response = client.get("/api/keys", auth=(org.sdk, ""))
    assert response.status_code == 200
    keys = {item["key"] for item in response.json["data"]}
    assert keys == {shown(org.sdk), shown(org.telemetry), shown(custom)}
    text = response.get_data(as_text=True)
    for full_key in (org.sdk, org.telemetry, custom):
        assert full_key not in text
        assert full_key[len(identifier_of(full_key)) :] not in text


def test_created_key_is_listed_without_its_full_value(client, org):
    body = {"name": "fresh", "kind": "custom", "scopes": ["site:read"]}
    created = client.post("/api/keys", json=body, auth=(org.sdk, ""))
    assert created.status_code == 201
    full_key = created.json["key"]
    response = client.get("/api/keys", auth=(org.sdk, ""))
    assert shown(full_key) in {item["key"] for item in response.json["data"]}
    assert full_key not in response.get_data(as_text=True)


def test_list_shows_only_the_callers_organizations_keys(client, org, other_org, make_key):
    theirs = make_key(name="theirs", org_name=other_org.name)
    ours = listing(client, org.sdk)
    assert ours["total_count"] == 2
    assert {item["key"] for item in ours["data"]} == {shown(org.sdk), shown(org.telemetry)}
    text = client.get("/api/keys", auth=(org.sdk, "")).get_data(as_text=True)
    for key in (other_org.sdk, other_org.telemetry, theirs):
        assert identifier_of(key) not in text
