"""The operator's commands, `flask org create` and `flask keys create` (docs/design.md,
"Organizations and the first start").

Each command runs through Flask's CLI runner on the test's database; what it prints is
then checked over HTTP with the test client, and a refused command must leave the
database as it was.
"""

from __future__ import annotations

import json

import pytest

from app.domain.keyformat import identifier_of
from tests.key_fields import KEY_FIELDS
from tests.printed import FULL_KEY_CANDIDATE, NOT_SHOWN_AGAIN

# The scope table of the specification, in its order.
SCOPE_TABLE = [
    "monitor:read",
    "monitor:write",
    "monitor:telemetry",
    "site:read",
    "site:write",
    "statuspage:read",
    "statuspage:write",
    "issue:read",
    "issue:write",
    "integration:read",
    "integration:write",
]
STARTING_KEYS = {("Telemetry", "telemetry"), ("SDK Integration", "sdk_integration")}
# Anything that may be a full key: a long run of key characters (full keys are 53 long).


def invoke(runner, *args: str):
    return runner.invoke(args=list(args))


def counts(sql) -> tuple[int, int]:
    """(organizations, keys) in the whole database."""
    [(organizations, keys)] = sql(
        "SELECT (SELECT count(*) FROM organizations), (SELECT count(*) FROM api_keys)"
    )
    return organizations, keys


def key_count(client, sdk_key: str) -> int:
    """The number of keys the organization of `sdk_key` has, as the API counts them."""
    response = client.get("/api/keys", auth=(sdk_key, ""))
    assert response.status_code == 200, response.json
    return response.json["total_count"]


def read_key(client, caller: str, full_key: str) -> dict:
    """The key object `caller` sees for `full_key`."""
    response = client.get(f"/api/keys/{full_key}", auth=(caller, ""))
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.json


def printed_keys(text: str) -> list[str]:
    return FULL_KEY_CANDIDATE.findall(text)


def sdk_of(client, keys: list[str]) -> str:
    """The one key of `keys` that may list keys (the SDK Integration key)."""
    managing = [k for k in keys if client.get("/api/keys", auth=(k, "")).status_code == 200]
    assert len(managing) == 1, managing
    return managing[0]


def assert_refused(result, sql, before: tuple[int, int]) -> None:
    """A refused command: exit status 1, one line on stderr, no key shown, nothing written."""
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    # A command that fails with a traceback exits 1 too: only a clean exit counts.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].strip()
    assert printed_keys(result.output) == []
    assert counts(sql) == before


def assert_key_object(body: dict) -> None:
    assert set(body) == set(KEY_FIELDS), body
    assert body["last_used"] is None
    assert body["created"] == body["updated"]


# --- org create ---------------------------------------------------------------------------


def test_org_create_prints_both_full_keys_once_and_they_authenticate(runner, client):
    result = invoke(runner, "org", "create", "initech")
    assert result.exit_code == 0, result.output
    keys = printed_keys(result.stdout)
    assert len(keys) == 2 and len(set(keys)) == 2, result.stdout
    sdk = sdk_of(client, keys)
    seen = {(k["name"], k["kind"]) for k in (read_key(client, sdk, key) for key in keys)}
    assert seen == STARTING_KEYS
    telemetry = next(key for key in keys if key != sdk)
    assert client.get("/api/keys", auth=(telemetry, "")).status_code == 403  # known, not 401


def test_org_create_says_the_keys_will_not_be_shown_again(runner):
    result = invoke(runner, "org", "create", "initech")
    assert result.exit_code == 0, result.output
    notices = [line for line in result.output.splitlines() if NOT_SHOWN_AGAIN.search(line)]
    assert len(notices) == 1, result.output


def test_org_create_json_prints_exactly_the_organization_and_its_two_key_objects(runner, client):
    result = invoke(runner, "org", "create", "initech", "--json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert set(printed) == {"organization", "keys"}
    assert printed["organization"] == "initech"
    keys = printed["keys"]
    assert isinstance(keys, list) and len(keys) == 2
    assert {(k["name"], k["kind"]) for k in keys} == STARTING_KEYS
    by_kind = {k["kind"]: k for k in keys}
    for body in keys:
        assert_key_object(body)
        assert body["immutable"] is True
    assert by_kind["telemetry"]["scopes"] == ["monitor:telemetry"]
    assert by_kind["sdk_integration"]["scopes"] == SCOPE_TABLE
    sdk = by_kind["sdk_integration"]["key"]
    for body in keys:
        stored = read_key(client, sdk, body["key"])  # the full key names the key
        assert body["key"].startswith(stored["key"].removesuffix("..."))
        assert (stored["name"], stored["kind"]) == (body["name"], body["kind"])
    assert client.get("/api/keys", auth=(sdk, "")).status_code == 200


def test_org_create_json_shows_each_full_key_exactly_once(runner):
    result = invoke(runner, "org", "create", "initech", "--json")
    assert result.exit_code == 0, result.output
    for body in json.loads(result.stdout)["keys"]:
        assert result.output.count(body["key"]) == 1


@pytest.mark.parametrize("name", ["acme", "  acme  "], ids=["same", "same after trimming"])
def test_org_create_with_a_duplicate_name_is_refused_and_writes_nothing(runner, sql, org, name):
    before = counts(sql)
    result = invoke(runner, "org", "create", name)
    assert_refused(result, sql, before)
    assert "acme" in result.stderr


def test_org_create_with_a_duplicate_name_json_is_refused_too(runner, sql, org):
    before = counts(sql)
    result = invoke(runner, "org", "create", "acme", "--json")
    assert_refused(result, sql, before)


@pytest.mark.parametrize(
    "name", ["", "   ", "x" * 201, "nul\x00here"], ids=["empty", "blank", "too long", "NUL"]
)
def test_org_create_with_an_invalid_name_is_refused_and_writes_nothing(runner, sql, name):
    before = counts(sql)
    result = invoke(runner, "org", "create", name)
    assert_refused(result, sql, before)


def test_org_create_name_is_stored_trimmed(runner):
    result = invoke(runner, "org", "create", "  initech ", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["organization"] == "initech"


# --- org list ----------------------------------------------------------------------------


def test_org_list_shows_each_organization_once_with_its_key_count(runner, client, org):
    assert invoke(runner, "org", "create", "Initech").exit_code == 0
    client.post("/api/keys", json={"name": "more", "kind": "telemetry"}, auth=(org.sdk, ""))
    result = invoke(runner, "org", "list")
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert [line.split("\t")[:2] for line in lines] == [["Initech", "2 keys"], ["acme", "3 keys"]]
    assert printed_keys(result.output) == []


def test_org_list_json_lists_names_key_counts_and_creation_times(runner, org):
    result = invoke(runner, "org", "list", "--json")
    assert result.exit_code == 0, result.output
    [acme] = json.loads(result.stdout)["organizations"]
    assert (acme["name"], acme["keys"]) == ("acme", 2)
    assert acme["created"].endswith("Z")


def test_org_list_on_an_empty_database_says_so(runner):
    result = invoke(runner, "org", "list")
    assert result.exit_code == 0, result.output
    assert "no organization" in result.stdout


# --- keys create --------------------------------------------------------------------------


def test_key_create_mints_a_key_whose_printed_value_authenticates(runner, client, org):
    before = key_count(client, org.sdk)
    result = invoke(
        runner, "keys", "create", "--org", "acme", "--kind", "custom", "--name", "Recovery",
        "--scope", "monitor:read", "--scope", "site:write",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    keys = printed_keys(result.stdout)
    assert len(keys) == 1, result.stdout
    assert result.output.count(keys[0]) == 1
    minted = read_key(client, keys[0], keys[0])  # it authenticates and reads itself
    assert (minted["name"], minted["kind"]) == ("Recovery", "custom")
    assert minted["scopes"] == ["monitor:read", "site:write"]
    assert key_count(client, org.sdk) == before + 1


def test_key_create_says_the_key_will_not_be_shown_again(runner, org):
    result = invoke(
        runner, "keys", "create", "--org", "acme", "--kind", "custom", "--name", "Recovery",
        "--scope", "monitor:read",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert NOT_SHOWN_AGAIN.search(result.output), result.output
    # One key: said of one key.
    assert "This key is shown once and will not be shown again" in result.output
    assert "These keys" not in result.output


def test_key_create_json_prints_the_key_object_with_the_full_key(runner, client, org):
    result = invoke(
        runner, "keys", "create", "--org", "acme", "--kind", "custom", "--name", "Recovery",
        "--scope", "site:write", "--scope", "monitor:read", "--scope", "site:write", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert_key_object(body)
    assert body["name"] == "Recovery"
    assert body["kind"] == "custom"
    assert body["scopes"] == ["monitor:read", "site:write"]  # folded, in table order
    assert body["immutable"] is False
    stored = read_key(client, org.sdk, body["key"])
    assert body["key"].startswith(stored["key"].removesuffix("..."))
    assert {k: v for k, v in stored.items() if k not in ("key", "last_used")} == {
        k: v for k, v in body.items() if k not in ("key", "last_used")
    }
    assert client.get("/api/keys", auth=(body["key"], "")).status_code == 200


@pytest.mark.parametrize(
    ("kind", "scopes", "expected"),
    [
        ("telemetry", [], ["monitor:telemetry"]),
        ("telemetry", ["monitor:telemetry"], ["monitor:telemetry"]),
        ("sdk_integration", [], SCOPE_TABLE),
        ("sdk_integration", SCOPE_TABLE, SCOPE_TABLE),
    ],
    ids=["telemetry", "telemetry with its scopes", "sdk", "sdk with its scopes"],
)
def test_key_create_mints_fixed_kinds_with_their_fixed_scopes(
    runner, client, org, kind, scopes, expected
):
    options = [part for scope in scopes for part in ("--scope", scope)]
    result = invoke(
        runner, "keys", "create", "--org", "acme", "--kind", kind, "--name", "k", *options, "--json"
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert (body["kind"], body["scopes"], body["immutable"]) == (kind, expected, True)
    assert read_key(client, org.sdk, body["key"])["scopes"] == expected


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("2999-01-02T03:04:05Z", "2999-01-02T03:04:05.000000Z"),
        ("2999-01-02T05:04:05+02:00", "2999-01-02T03:04:05.000000Z"),
    ],
)
def test_key_create_with_expires_at_mints_a_key_that_expires_then(
    runner, client, org, given, shown
):
    result = invoke(
        runner, "keys", "create", "--org", "acme", "--kind", "telemetry", "--name", "Temporary",
        "--expires-at", given, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["expires_at"] == shown
    assert read_key(client, org.sdk, body["key"])["expires_at"] == shown


@pytest.mark.parametrize(
    ("case", "word"),
    [("expiry in the past", "future"), ("expiry without an offset", "offset")],
)
def test_key_create_refuses_a_bad_expiry_naming_it(runner, org, case, word):
    result = invoke(runner, "keys", "create", "--name", "Recovery", *REFUSED_KEY_CREATE[case])
    assert result.exit_code == 1
    assert "expires_at" in result.stderr and word in result.stderr, result.stderr


def test_key_create_mints_a_key_even_when_the_organization_has_no_keys_left(runner, client, org):
    """The operator can always get back in: the CLI is not bound by any key."""
    for key in (org.telemetry, org.sdk):
        reference = read_key(client, org.sdk, key)["key"]
        assert client.delete(f"/api/keys/{reference}", auth=(org.sdk, "")).status_code == 204
    assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 401
    result = invoke(
        runner, "keys", "create", "--org", "acme", "--kind", "sdk_integration", "--name", "Back in",
        "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    back_in = json.loads(result.stdout)["key"]
    response = client.get("/api/keys", auth=(back_in, ""))
    assert response.status_code == 200
    assert response.json["total_count"] == 1


REFUSED_KEY_CREATE = {
    "unknown organization": ["--org", "nowhere", "--kind", "custom", "--scope", "monitor:read"],
    "unknown kind": ["--org", "acme", "--kind", "admin", "--scope", "monitor:read"],
    "unknown scope": ["--org", "acme", "--kind", "custom", "--scope", "monitor:admin"],
    "unknown scope beside a known one": [
        "--org", "acme", "--kind", "custom", "--scope", "site:read", "--scope", "site:admin",
    ],
    "custom without scope": ["--org", "acme", "--kind", "custom"],
    "telemetry with another scope": [
        "--org", "acme", "--kind", "telemetry", "--scope", "monitor:read",
    ],
    "telemetry with an extra scope": [
        "--org", "acme", "--kind", "telemetry", "--scope", "monitor:telemetry",
        "--scope", "monitor:read",
    ],
    "sdk_integration with fewer scopes": [
        "--org", "acme", "--kind", "sdk_integration", "--scope", "monitor:read",
    ],
    "expiry in the past": [
        "--org", "acme", "--kind", "telemetry", "--expires-at", "2020-01-01T00:00:00Z",
    ],
    "expiry without an offset": [
        "--org", "acme", "--kind", "telemetry", "--expires-at", "2999-01-01T00:00:00",
    ],
    "expiry not a time": ["--org", "acme", "--kind", "telemetry", "--expires-at", "soon"],
}  # fmt: skip


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("case", list(REFUSED_KEY_CREATE))
def test_key_create_refusal_is_one_line_on_stderr_exit_1_and_writes_nothing(
    runner, client, sql, org, case, as_json
):
    before_api = key_count(client, org.sdk)
    before = counts(sql)
    args = ["keys", "create", "--name", "Recovery", *REFUSED_KEY_CREATE[case]]
    result = invoke(runner, *args, *(["--json"] if as_json else []))
    assert_refused(result, sql, before)
    assert key_count(client, org.sdk) == before_api


@pytest.mark.parametrize(
    ("case", "word"),
    [
        ("unknown organization", "nowhere"),
        ("unknown kind", "kind"),
        ("unknown scope", "scope"),
        ("custom without scope", "scope"),
        ("telemetry with another scope", "scope"),
    ],
)
def test_key_create_refusal_names_what_is_wrong(runner, org, case, word):
    result = invoke(runner, "keys", "create", "--name", "Recovery", *REFUSED_KEY_CREATE[case])
    assert result.exit_code == 1
    assert word in result.stderr, result.stderr


@pytest.mark.parametrize("name", ["", "   ", "x" * 201, "tab\there"])
def test_key_create_with_an_invalid_name_is_refused_and_writes_nothing(runner, sql, org, name):
    before = counts(sql)
    result = invoke(
        runner, "keys", "create", "--org", "acme", "--kind", "custom", "--name", name,
        "--scope", "monitor:read",
    )  # fmt: skip
    assert_refused(result, sql, before)


@pytest.mark.parametrize("organization", ["", "nul\x00here", "x" * 201])
def test_key_create_with_an_invalid_organization_name_is_refused_in_one_line(
    runner, sql, org, organization
):
    """Refused before the database is asked (PostgreSQL cannot even compare a NUL)."""
    before = counts(sql)
    result = invoke(
        runner, "keys", "create", "--org", organization, "--kind", "telemetry", "--name", "t"
    )
    assert_refused(result, sql, before)
    assert result.stderr.startswith("Error: --org:"), result.stderr


def test_first_start_makes_default_once_and_shows_its_keys_once(runner, client, sql):
    """`flask first-start` (make dev) is the first start gunicorn runs in on_starting."""
    first = invoke(runner, "first-start")
    assert first.exit_code == 0, first.output
    keys = printed_keys(first.output)
    assert len(keys) == 2
    assert key_count(client, sdk_of(client, keys)) == 2
    again = invoke(runner, "first-start")
    assert again.exit_code == 0, again.output
    assert printed_keys(again.output) == []
    assert [name for (name,) in sql("SELECT name FROM organizations")] == ["default"]


# --- the operator's keys list and delete (issue 36) ------------------------------------------


def test_key_list_shows_every_key_of_the_organization_and_never_a_full_key(
    runner, client, org, other_org, monkeypatch
):
    from app.keys import operator

    made = client.post(
        "/api/keys",
        json={"name": "Deploys", "kind": "custom", "scopes": ["site:read", "monitor:read"]},
        auth=(org.sdk, ""),
    ).json
    monkeypatch.setattr(operator, "_OPERATOR_PAGE", 2)  # read in pages, each key once
    result = invoke(runner, "keys", "list", "acme")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split("\t")[:3] for line in lines[:-1]] == [
        [identifier_of(org.telemetry) + "...", "telemetry", "Telemetry"],
        [identifier_of(org.sdk) + "...", "sdk_integration", "SDK Integration"],
        [identifier_of(made["key"]) + "...", "custom", "Deploys"],
    ]
    assert lines[2].split("\t")[3:] == ["monitor:read site:read", "last used never"]
    assert lines[-1] == '3 keys in organization "acme".'
    assert printed_keys(result.output) == []
    as_json = json.loads(invoke(runner, "keys", "list", "acme", "--json").stdout)
    assert as_json["organization"] == "acme"
    listed = client.get("/api/keys", auth=(org.sdk, "")).json["data"]
    assert as_json["keys"] == listed


@pytest.mark.parametrize("args", [["nobody"], [""], ["nul\x00here"]])
def test_key_list_refusals_are_one_line(runner, sql, org, args):
    before = counts(sql)
    assert_refused(invoke(runner, "keys", "list", *args), sql, before)


@pytest.mark.parametrize("form", ["identifier", "shown", "full"])
def test_key_delete_ends_a_key_and_records_it_as_the_operators(runner, client, org, form):
    reference = {
        "identifier": identifier_of(org.sdk),
        "shown": identifier_of(org.sdk) + "...",
        "full": org.sdk,
    }[form]
    result = invoke(runner, "keys", "delete", "acme", reference)
    assert result.exit_code == 0, result.output
    assert result.output == (
        f'Deleted SDK Integration ({identifier_of(org.sdk)}..., sdk_integration) of "acme".\n'
    )
    assert client.get("/api/keys", auth=(org.sdk, "")).status_code == 401
    # Every managing key lost: the operator mints one, which reads the log.
    minted = invoke(
        runner, "keys", "create", "--org", "acme", "--kind", "sdk_integration", "--name", "R"
    )
    (recovery,) = printed_keys(minted.output)
    deleted = client.get("/api/audit?action=key.deleted", auth=(recovery, "")).json["data"]
    assert [(e["actor"], e["target"], e["target_name"]) for e in deleted] == [
        ("operator", identifier_of(org.sdk) + "...", "SDK Integration")
    ]
    assert deleted[0]["client_address"] is None


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nobody", "ak_whatever0"], 'no organization is named "nobody"'),
        (["acme", "ak_unknownkey0"], 'organization "acme" has no key "ak_unknownkey0"'),
        (["acme", "not a key"], 'organization "acme" has no key "not a key"'),
    ],
)
def test_key_delete_refusals_are_one_line_and_delete_nothing(runner, sql, org, args, said):
    before = counts(sql)
    result = invoke(runner, "keys", "delete", *args)
    assert_refused(result, sql, before)
    assert said in result.stderr


def test_key_delete_of_another_organizations_key_deletes_nothing(runner, sql, org, other_org):
    before = counts(sql)
    result = invoke(runner, "keys", "delete", "acme", other_org.sdk)
    assert_refused(result, sql, before)
    assert other_org.sdk not in result.stderr  # a full key is never echoed
    assert identifier_of(other_org.sdk) + "..." in result.stderr


@pytest.mark.parametrize(
    "name", ["   ", "x" * 201, "bidi \u202e", "tab\there"], ids=["blank", "long", "bidi", "tab"]
)
def test_organization_names_follow_the_rules_of_key_names(runner, sql, client, org, name):
    """One rule for both (schemas.Name): what a key's name may not be, an organization's
    may not either, with the same words."""
    refused_key = client.post(
        "/api/keys", json={"name": name, "kind": "telemetry"}, auth=(org.sdk, "")
    ).json["errors"]["name"]
    before = counts(sql)
    result = invoke(runner, "org", "create", name)
    assert_refused(result, sql, before)
    assert result.stderr.strip() == f"Error: name: {' '.join(refused_key)}"


# --- one group of key commands --------------------------------------------------------------


def test_the_operators_key_commands_are_one_group(runner):
    """`flask keys` mints, lists, deletes, imports and exports; `flask key`, its old name,
    still answers but is no longer listed."""
    listed = invoke(runner, "--help").stdout
    assert "keys" in listed and "\n  key " not in listed
    assert {"create", "list", "delete", "import", "export"} <= set(
        line.split()[0]
        for line in invoke(runner, "keys", "--help").stdout.split("Commands:")[1].splitlines()
        if line.strip()
    )
    made = invoke(runner, "keys", "create", "--org", "acme", "--kind", "telemetry", "--name", "R")
    assert made.exit_code != 0 and '"acme"' in made.output  # no such organization: said
    assert invoke(runner, "keys", "list", "--help").exit_code == 0
