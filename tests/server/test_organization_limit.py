"""An organization's `max_keys` (docs/design.md, "Organization policy") under concurrent creates,
through a real gunicorn with several workers: never one key past it. Each create decides inside its
own write transaction, the organization's row locked (PostgreSQL) or the database's write
lock held (SQLite), so that of 20 creates sent at once into room for 10 exactly 10 are made
and the others answer 409 `key_limit_reached`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.conftest import Server, serving
from tests.server.test_gunicorn import sdk_key
from tests.server.test_write_races import at_once

WORKERS = 4
CREATES = 20
ROOM = 10
# Each round on a fresh room. With govern() reading the policy and the count unlocked, every
# round let more than ROOM keys in, on SQLite and on PostgreSQL.
ROUNDS = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    with serving(
        tmp_path_factory, "organization-limit", WORKERS, {"RATELIMIT_ENABLED": "false"}
    ) as server:
        yield server


def key_count(server: Server) -> int:
    [(count,)] = server.query("SELECT count(*) FROM api_keys")
    return count


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_twenty_creates_at_once_never_pass_max_keys(server, round_):
    admin = sdk_key(server)
    held = key_count(server)
    server.flask("org", "policy", "default", "--max-keys", str(held + ROOM))
    body = {"name": f"round {round_}", "kind": "custom", "scopes": ["monitor:read"]}
    answers = at_once(server, *[("POST", "/api/keys", admin, body)] * CREATES)
    statuses = sorted(answer.status for answer in answers)
    assert statuses == [201] * ROOM + [409] * (CREATES - ROOM), statuses
    codes = {answer.json()["code"] for answer in answers if answer.status == 409}
    assert codes == {"key_limit_reached"}
    assert key_count(server) == held + ROOM
    log = server.request("GET", "/api/audit?action=key.created&page_size=200", admin).json()
    made = [event for event in log["data"] if event["details"]["name"] == body["name"]]
    assert len(made) == ROOM
    shown = server.request("GET", "/api/organization", admin).json()
    assert (shown["key_count"], shown["policy"]["max_keys"]) == (held + ROOM, held + ROOM)
