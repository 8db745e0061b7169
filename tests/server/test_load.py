"""Mixed load on real gunicorn workers (4 of them, 32 clients, two organizations), with and
without a worker killed by SIGKILL in the middle: every answer is the one its request
deserved, no acknowledged write is lost, no half-written key exists, and what survives is
exactly what was acknowledged. Besides keys of their own, the clients fight over a few
shared keys (get, update and delete the same key at once): each answer is 200, 204 or 404,
a key is deleted once, and its final name is one an update was acknowledged with.

SERVER_LOAD_SECONDS sets the length of the load (15 s by default).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from app.domain import keyformat
from app.domain.scopes import ALL, FIXED, SCOPES, to_bits
from tests.server.test_gunicorn import sdk_key

LOAD_SECONDS = float(os.environ.get("SERVER_LOAD_SECONDS", "15"))
WORKERS = 4
CLIENTS = 32
NO_LIMITS = {"RATELIMIT_ENABLED": "false"}
# How often each client does what; creates outnumber deletes, so keys accumulate.
OPERATIONS = ["create"] * 3 + ["get"] * 3 + ["list"] * 2 + ["update"] * 2 + ["delete"] * 2
OPERATIONS += ["foreign"] + ["shared"] * 2
SHARED_PER_ORGANIZATION = 3
SHARED_ANSWERS = {"GET": (200, 404), "PUT": (200, 404), "DELETE": (204, 404)}
ANSWER_LOST = (OSError, http.client.HTTPException)


@dataclass
class Key:
    """A key some client made: what the service acknowledged of it."""

    full: str
    organization: str
    name: str
    scopes: list[str]
    certain: bool = True  # False once an update's answer was lost

    @property
    def identifier(self) -> str:
        return keyformat.identifier_of(self.full)


@dataclass
class Shared:
    """A key every client of its organization gets, updates and deletes."""

    key: Key
    names: set[str]  # the name it was made with, and every name an update was told
    deletions: int = 0  # 204 answers
    lost: bool = False  # a write whose answer was lost: any outcome is possible


@dataclass
class Ledger:
    """What the clients were told, shared between them."""

    alive: dict[str, Key] = field(default_factory=dict)
    deleted: dict[str, Key] = field(default_factory=dict)
    delete_lost: dict[str, Key] = field(default_factory=dict)  # no answer: either way
    create_lost: int = 0  # no answer: the key may or may not exist
    unexpected: list[str] = field(default_factory=list)
    answers: Counter = field(default_factory=Counter)
    shared: dict[str, list[Shared]] = field(default_factory=dict)  # per organization
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, operation: str, status: int, expected: int, body: bytes) -> bool:
        with self.lock:
            self.answers[operation, status] += 1
            if status != expected:
                self.unexpected.append(f"{operation}: {status} {body[:300]!r}")
        return status == expected


def ordered(scopes) -> list[str]:
    return [scope for scope in SCOPES if scope in scopes]


def client_loop(server, number: int, organizations: dict, ledger: Ledger, deadline: float):
    """One client: manages keys of its own in one organization, and probes the other's."""
    rng = random.Random(number)  # noqa: S311 -- test data, not secrets
    mine, other = sorted(organizations)[number % 2], sorted(organizations)[1 - number % 2]
    admin = organizations[mine]
    keys: list[Key] = []
    made = 0
    while time.monotonic() < deadline:
        operation = rng.choice(OPERATIONS) if keys else "create"
        if operation in ("create", "update", "shared"):
            scopes = ordered(rng.sample(SCOPES, rng.randint(1, 4)))
            name = f"client {number} key {made}"
            made += 1
        try:
            if operation == "create":
                body = {"name": name, "kind": "custom", "scopes": scopes}
                answer = server.request("POST", "/api/keys", admin, body)
                if ledger.note(operation, answer.status, 201, answer.body):
                    key = Key(answer.json()["key"], mine, name, scopes)
                    keys.append(key)
                    with ledger.lock:
                        ledger.alive[key.full] = key
            elif operation == "get":
                key = rng.choice(keys)
                reference = rng.choice([key.identifier, f"{key.identifier}...", key.full])
                answer = server.request("GET", f"/api/keys/{reference}", admin)
                if ledger.note(operation, answer.status, 200, answer.body) and key.certain:
                    found = answer.json()
                    if (found["name"], found["scopes"]) != (key.name, key.scopes):
                        ledger.note("get: stale or wrong key", 0, 1, answer.body)
            elif operation == "list":
                path = f"/api/keys?page={rng.randint(1, 3)}&page_size=50"
                ledger.note(operation, server.request("GET", path, admin).status, 200, b"")
            elif operation == "update":
                key = rng.choice(keys)
                key.certain = False
                body = {"name": name, "scopes": scopes}
                answer = server.request("PUT", f"/api/keys/{key.identifier}", admin, body)
                if ledger.note(operation, answer.status, 200, answer.body):
                    key.name, key.scopes, key.certain = name, scopes, True
            elif operation == "delete":
                key = keys.pop(rng.randrange(len(keys)))
                with ledger.lock:
                    del ledger.alive[key.full]
                    ledger.delete_lost[key.full] = key
                answer = server.request("DELETE", f"/api/keys/{key.identifier}", admin)
                with ledger.lock:
                    del ledger.delete_lost[key.full]
                if ledger.note(operation, answer.status, 204, answer.body):
                    with ledger.lock:
                        ledger.deleted[key.full] = key
            elif operation == "shared":
                shared = rng.choice(ledger.shared[mine])
                # Updates race each other first; deletes join them for the last third.
                late = time.monotonic() > deadline - LOAD_SECONDS / 3
                verb = rng.choice(["GET", "PUT", "PUT"] + ["DELETE"] * late)
                contest(server, admin, ledger, shared, verb, {"name": name, "scopes": scopes})
            else:  # another organization's key: as if it did not exist
                with ledger.lock:
                    theirs = [k for k in ledger.alive.values() if k.organization == other]
                if theirs:
                    path = f"/api/keys/{rng.choice(theirs).identifier}"
                    answer = server.request("GET", path, admin)
                    ledger.note(operation, answer.status, 404, answer.body)
        except ANSWER_LOST:
            with ledger.lock:
                ledger.answers[operation, "lost"] += 1
                if operation == "create":
                    ledger.create_lost += 1


def contest(server, admin: str, ledger: Ledger, shared: Shared, verb: str, body: dict) -> None:
    """One request on a shared key; every outcome the race allows is accepted."""
    try:
        answer = server.request(verb, f"/api/keys/{shared.key.identifier}", admin, body)
    except ANSWER_LOST:
        shared.lost = shared.lost or verb != "GET"
        raise
    with ledger.lock:
        ledger.answers[f"shared {verb}", answer.status] += 1
        if answer.status not in SHARED_ANSWERS[verb]:
            ledger.unexpected.append(f"shared {verb}: {answer.status} {answer.body[:300]!r}")
        elif verb == "PUT" and answer.status == 200:
            shared.names.add(body["name"])
        elif verb == "DELETE" and answer.status == 204:
            shared.deletions += 1
        elif verb == "GET" and answer.status == 200 and answer.json()["name"] not in shared.names:
            # An update's commit may be seen before its answer reaches the client.
            shared.names.add(answer.json()["name"])


def make_shared(server, organizations: dict, ledger: Ledger) -> None:
    for organization, admin in organizations.items():
        ledger.shared[organization] = []
        for number in range(SHARED_PER_ORGANIZATION):
            name = f"shared {number}"
            body = {"name": name, "kind": "custom", "scopes": ["monitor:read"]}
            answer = server.request("POST", "/api/keys", admin, body)
            assert answer.status == 201, answer.body
            key = Key(answer.json()["key"], organization, name, ["monitor:read"], certain=False)
            ledger.shared[organization].append(Shared(key, {name}))


def settle_shared(ledger: Ledger) -> None:
    """After the load, each shared key joins the ledger by what its answers say."""
    for shared in (s for group in ledger.shared.values() for s in group):
        assert shared.deletions <= 1, f"{shared.key.identifier} deleted {shared.deletions} times"
        if shared.deletions:
            ledger.deleted[shared.key.full] = shared.key
        elif shared.lost:
            ledger.delete_lost[shared.key.full] = shared.key
        else:
            ledger.alive[shared.key.full] = shared.key


def run_load(server, during: Callable[[], None] | None = None) -> tuple[Ledger, dict]:
    """Drive the server with CLIENTS clients for LOAD_SECONDS; `during` runs a third of
    the way in. The ledger, and each organization's SDK Integration key."""
    second = json.loads(server.flask("org", "create", "second", "--json").stdout)
    organizations = {
        "default": sdk_key(server),
        "second": next(k["key"] for k in second["keys"] if k["kind"] == "sdk_integration"),
    }
    ledger = Ledger()
    make_shared(server, organizations, ledger)
    deadline = time.monotonic() + LOAD_SECONDS
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        running = [
            pool.submit(client_loop, server, number, organizations, ledger, deadline)
            for number in range(CLIENTS)
        ]
        if during is not None:
            time.sleep(LOAD_SECONDS / 3)
            during()
        for client in running:
            client.result()
    settle_shared(ledger)
    return ledger, organizations


def listed(server, admin: str) -> tuple[int, set[str]]:
    """total_count, and the shown form of every key, walking every page."""
    shown: set[str] = set()
    page = 1
    while True:
        answer = server.request("GET", f"/api/keys?page={page}&page_size=200", admin)
        assert answer.status == 200, answer.body
        body = answer.json()
        shown |= {key["key"] for key in body["data"]}
        if not body["data"]:
            return body["total_count"], shown
        page += 1


def shown_in(keys: dict[str, Key], organization: str) -> set[str]:
    return {f"{k.identifier}..." for k in keys.values() if k.organization == organization}


def check_final_state(server, ledger: Ledger, organizations: dict) -> None:
    """What survives is what was acknowledged; every key is whole and answers as it should."""
    print(f"answers after {LOAD_SECONDS} s: {sorted(ledger.answers.items(), key=str)}")
    assert ledger.unexpected == [], ledger.unexpected[:20]
    assert ledger.answers["create", 201] > 100, ledger.answers  # the load really ran
    lost_creates = ledger.create_lost
    for organization, admin in organizations.items():
        total, shown = listed(server, admin)
        assert total == len(shown)
        alive = shown_in(ledger.alive, organization)
        maybe = shown_in(ledger.delete_lost, organization)
        starting = 2  # the organization's Telemetry and SDK Integration keys
        assert alive <= shown, f"acknowledged keys lost: {sorted(alive - shown)[:5]}"
        unaccounted = shown - alive - maybe
        assert len(unaccounted) - starting <= lost_creates, sorted(unaccounted)[:5]
        lost_creates -= len(unaccounted) - starting
        assert not shown_in(ledger.deleted, organization) & shown
    check_rows_are_whole(server)
    names = {s.key.full: s.names for group in ledger.shared.values() for s in group}
    verify = [(key, 200) for key in ledger.alive.values()]
    verify += [(key, 401) for key in ledger.deleted.values()]

    def answer(item):
        key, expected = item
        got = server.request("GET", f"/api/keys/{key.identifier}", key.full)
        if got.status != expected:
            return f"{key.identifier}: {got.status}, expected {expected}"
        if expected != 200:
            return None
        found = got.json()
        if key.certain and (found["name"], found["scopes"]) != (key.name, key.scopes):
            return f"{key.identifier}: {found}, expected {key.name!r} with {key.scopes}"
        if key.full in names and found["name"] not in names[key.full]:
            return f"{key.identifier}: name {found['name']!r} was never given"
        return None

    with ThreadPoolExecutor(max_workers=16) as pool:
        wrong = [problem for problem in pool.map(answer, verify) if problem]
    assert wrong == [], wrong[:20]


def check_rows_are_whole(server) -> None:
    """Every stored key has every column, in a state a finished write leaves."""
    rows = server.query(
        "SELECT k.identifier, k.digest, k.name, k.kind, k.scope_bits, k.created, k.updated, "
        "o.name FROM api_keys k LEFT JOIN organizations o ON o.id = k.organization_id"
    )
    for identifier, digest, name, kind, bits, created, updated, organization in rows:
        assert keyformat.is_identifier(identifier), identifier
        assert len(bytes(digest)) == 32 and name and organization, identifier
        assert bits == FIXED.get(kind, bits) and bits > 0 and bits & ~ALL == 0, identifier
        assert created <= updated, identifier


def test_mixed_load_gets_only_deserved_answers_and_keeps_every_acknowledged_write(
    start_server,
):
    server = start_server(workers=WORKERS, env=NO_LIMITS)
    ledger, organizations = run_load(server)
    assert not any(status == "lost" for _, status in ledger.answers), ledger.answers
    check_final_state(server, ledger, organizations)
    assert to_bits(SCOPES) == ALL


def test_a_worker_killed_under_load_loses_no_acknowledged_write(start_server):
    server = start_server(workers=WORKERS, env=NO_LIMITS)
    victims: list[int] = []

    def kill_a_worker():
        victims.append(min(server.worker_pids()))
        os.kill(victims[0], signal.SIGKILL)

    ledger, organizations = run_load(server, during=kill_a_worker)
    assert victims and victims[0] not in server.worker_pids()
    server.wait_until_ready(WORKERS + 1)  # gunicorn replaced it
    assert len(server.worker_pids()) == WORKERS
    check_final_state(server, ledger, organizations)
