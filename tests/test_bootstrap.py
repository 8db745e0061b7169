"""The first start (docs/design.md, "Organizations and the first start"): on a database with no
organization the server makes organization `default`, and prints its two keys once with a line
saying they will not be shown again. Every server start runs app.bootstrap.first_start
(gunicorn.conf.py); tests/server/ checks the same with real gunicorn workers."""

from __future__ import annotations

from app.bootstrap import ensure_default_organization
from tests.printed import FULL_KEY_CANDIDATE, NOT_SHOWN_AGAIN

STARTING_KEYS = {("Telemetry", "telemetry"), ("SDK Integration", "sdk_integration")}


def rows(sql) -> tuple[list[str], int]:
    """(organization names, number of keys) in the whole database."""
    names = [name for (name,) in sql("SELECT name FROM organizations ORDER BY id")]
    [(keys,)] = sql("SELECT count(*) FROM api_keys")
    return names, keys


def test_first_start_on_an_empty_database_makes_organization_default_with_two_keys(
    app, client, sql, capsys
):
    assert rows(sql) == ([], 0)
    ensure_default_organization(app)
    assert rows(sql) == (["default"], 2)
    printed = FULL_KEY_CANDIDATE.findall(capsys.readouterr().out)
    managing = [k for k in printed if client.get("/api/keys", auth=(k, "")).status_code == 200]
    assert len(managing) == 1
    listing = client.get("/api/keys", auth=(managing[0], "")).json
    assert {(key["name"], key["kind"]) for key in listing["data"]} == STARTING_KEYS


def test_first_start_prints_both_full_keys_once_and_they_authenticate(app, client, capsys):
    ensure_default_organization(app)
    out = capsys.readouterr().out
    printed = FULL_KEY_CANDIDATE.findall(out)
    assert len(printed) == 2 and len(set(printed)) == 2, out
    statuses = sorted(client.get("/api/keys", auth=(k, "")).status_code for k in printed)
    assert statuses == [200, 403]  # the SDK Integration key, and the Telemetry key


def test_first_start_says_the_keys_will_not_be_shown_again(app, capsys):
    ensure_default_organization(app)
    out = capsys.readouterr().out
    notices = [line for line in out.splitlines() if NOT_SHOWN_AGAIN.search(line)]
    assert len(notices) == 1, out


def test_second_start_makes_nothing_and_prints_nothing(app, sql, capsys):
    ensure_default_organization(app)
    first = capsys.readouterr()
    assert FULL_KEY_CANDIDATE.search(first.out)
    after_first = rows(sql)
    ensure_default_organization(app)
    second = capsys.readouterr()
    assert (second.out, second.err) == ("", "")
    assert rows(sql) == after_first == (["default"], 2)


def test_start_on_a_database_that_has_an_organization_makes_nothing(app, sql, org, capsys):
    before = rows(sql)
    assert before == (["acme"], 2)
    ensure_default_organization(app)
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "")
    assert rows(sql) == before


def test_start_after_every_key_is_deleted_makes_no_default_organization(
    app, client, sql, org, capsys
):
    """An organization without keys is still an organization: nothing is made for it."""
    for key in (org.telemetry, org.sdk):
        shown = client.get(f"/api/keys/{key}", auth=(org.sdk, "")).json["key"]
        assert client.delete(f"/api/keys/{shown}", auth=(org.sdk, "")).status_code == 204
    ensure_default_organization(app)
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "")
    assert rows(sql) == (["acme"], 0)
