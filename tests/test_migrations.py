"""The schema as migrations (docs/design.md, "The database and health"): `flask --app app db
upgrade` builds an empty database and brings an old one up to date, keeping every existing key
working; the models match the migrations; on SQLite the CLI needs no separate step."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from app.extensions import db
from app.keys import operator
from app.storage.database import SchemaNotCurrent, require_current_schema, upgrade, upgrade_embedded
from tests.databases import needs_postgresql
from tests.processes import PROJECT, run_flask, service_env

MIGRATIONS = PROJECT / "migrations"
TABLES = {"organizations", "api_keys"}

# Keys as the first revision's code made them (literal values, so that a later change of
# the key format that breaks existing keys is caught): (identifier, full key, kind, bits).
OLD_KEYS = [
    (
        "ak_DVIJcZUXMfme",
        "ak_DVIJcZUXMfmeznSOa3WWtlPqvGQLz9P377d76K01pTtI0KIp3P",
        "sdk_integration",
        0b11111111111,
    ),
    (
        "ak_CNNpPUVkFfvc",
        "ak_CNNpPUVkFfvcAENmfYXyTj9KmU8pgR82tJEimR7mDAg74SBkWD",
        "telemetry",
        0b00000000100,
    ),
    (
        "ak_TI5NVO6Dia8U",
        "ak_TI5NVO6Dia8URJ1tlliDVq4jTs22yrIjDhnnu9oBm9hc32ucGY",
        "custom",
        0b00000001001,  # monitor:read and site:read
    ),
]


def alembic_config() -> Config:
    config = Config(str(MIGRATIONS / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["configure_logging"] = False
    return config


SCRIPTS = ScriptDirectory.from_config(alembic_config())


@pytest.fixture
def app_on(make_app):
    """Build apps on databases (URLs or SQLite paths) of the test's choice."""

    def make(database: Path | str):
        url = database if isinstance(database, str) else f"sqlite:///{database}"
        return make_app(SQLALCHEMY_DATABASE_URI=url)

    return make


@pytest.fixture
def preserved_logging():
    """`flask db` configures logging from alembic.ini; put the process's logging back."""
    loggers = [logging.root, *map(logging.getLogger, list(logging.root.manager.loggerDict))]
    saved = [(lg, lg.level, list(lg.handlers), lg.propagate, lg.disabled) for lg in loggers]
    yield
    for lg, level, handlers, propagate, disabled in saved:
        lg.setLevel(level)
        lg.handlers[:] = handlers
        lg.propagate, lg.disabled = propagate, disabled


def _engine(database: Path | str) -> sa.Engine:
    url = database if isinstance(database, str) else f"sqlite:///{database}"
    return sa.create_engine(url, hide_parameters=True)


def schema_and_data(database: Path | str) -> tuple[dict, dict]:
    """Everything a migration could change: each table's columns, indexes and constraints,
    and its rows."""
    engine = _engine(database)
    try:
        inspector = sa.inspect(engine)
        schema, data = {}, {}
        with engine.connect() as connection:
            for table in sorted(inspector.get_table_names()):
                columns = inspector.get_columns(table)
                schema[table] = [
                    [(c["name"], str(c["type"]), c["nullable"]) for c in columns],
                    inspector.get_pk_constraint(table),
                    inspector.get_foreign_keys(table),
                    sorted(inspector.get_indexes(table), key=lambda i: i["name"]),
                    sorted(inspector.get_unique_constraints(table), key=lambda u: u["name"]),
                    sorted(inspector.get_check_constraints(table), key=lambda c: c["name"]),
                ]
                reflected = sa.Table(table, sa.MetaData(), autoload_with=connection)
                data[table] = sorted(map(tuple, connection.execute(reflected.select())), key=repr)
    finally:
        engine.dispose()
    return schema, data


def tables_and_revision(database: Path | str) -> tuple[set[str], str | None]:
    engine = _engine(database)
    try:
        names = set(sa.inspect(engine).get_table_names())
        revision = None
        if "alembic_version" in names:
            with engine.connect() as connection:
                revision = connection.scalar(sa.text("SELECT version_num FROM alembic_version"))
    finally:
        engine.dispose()
    return names, revision


def assert_current(database: Path | str) -> None:
    names, revision = tables_and_revision(database)
    assert names >= TABLES, names
    assert revision == SCRIPTS.get_current_head()


def make_org(app) -> dict:
    result = app.test_cli_runner().invoke(args=["org", "create", "acme", "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    return {key["kind"]: key["key"] for key in json.loads(result.stdout)["keys"]}


def test_upgrade_builds_the_schema_of_an_empty_database(app_on, new_database):
    database = new_database()
    app = app_on(database)
    upgrade(app)
    assert_current(database)
    assert app.test_client().get("/healthz").status_code == 200


def test_flask_db_upgrade_builds_the_schema_of_an_empty_database(
    app_on, new_database, preserved_logging
):
    database = new_database()
    app = app_on(database)
    result = app.test_cli_runner().invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert_current(database)
    keys = make_org(app)
    assert app.test_client().get("/api/keys", auth=(keys["sdk_integration"], "")).status_code == 200


def test_flask_app_db_upgrade_command_builds_the_schema(new_database):
    """The documented command itself, in a process of its own."""
    database = new_database()
    run_flask(service_env(DATABASE_URL=database), "db", "upgrade")
    assert_current(database)


def test_upgrade_of_a_current_database_changes_nothing(app_on, new_database, preserved_logging):
    database = new_database()
    app = app_on(database)
    upgrade(app)
    keys = make_org(app)
    before = schema_and_data(database)
    upgrade(app)
    result = app.test_cli_runner().invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert schema_and_data(database) == before
    client = app.test_client()
    assert client.get("/api/keys", auth=(keys["sdk_integration"], "")).status_code == 200


def test_models_match_the_migrations(app_on, new_database):
    app = app_on(new_database())
    upgrade(app)
    with app.app_context(), db.engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": True}
        )
        differences = compare_metadata(context, db.metadata)
    assert differences == []


def test_there_is_a_single_head():
    assert len(SCRIPTS.get_heads()) == 1


def test_every_revision_has_a_way_to_store_keys_as_it_did():
    """A new revision comes with a function that writes OLD_KEYS into its tables, so that
    the test below upgrades keys stored at every revision, not only at the first."""
    assert set(STORE_KEYS_AT) == {script.revision for script in SCRIPTS.walk_revisions()}


@pytest.mark.parametrize("revision", sorted(script.revision for script in SCRIPTS.walk_revisions()))
def test_keys_stored_at_any_revision_still_authenticate_after_upgrade_to_head(
    app_on, new_database, revision
):
    database = new_database()
    app = app_on(database)
    with app.app_context():
        command.upgrade(alembic_config(), revision)
        STORE_KEYS_AT[revision](db.engine)
    upgrade(app)
    assert_current(database)
    client = app.test_client()
    sdk, telemetry, custom = (full_key for _, full_key, _, _ in OLD_KEYS)
    listing = client.get("/api/keys", auth=(sdk, ""))
    assert listing.status_code == 200, listing.json
    assert {k["key"] for k in listing.json["data"]} == {f"{i}..." for i, *_ in OLD_KEYS}
    assert listing.json["total_count"] == len(OLD_KEYS)
    by_kind = client.get("/api/keys?kind=custom", auth=(sdk, "")).json
    assert by_kind["total_count"] == 1
    assert client.get("/api/keys", auth=(telemetry, "")).status_code == 403  # known, not 401
    own = client.get(f"/api/keys/{custom}", auth=(custom, ""))
    assert own.status_code == 200, own.json
    assert own.json["scopes"] == ["monitor:read", "site:read"]
    assert own.json["created"] == "2026-01-02T03:04:05.000006Z"
    assert (own.json["expires_at"], own.json["created_by"]) == (None, None)
    # 0004's policy: every key stored before it is enabled, usable from anywhere, with no
    # limit of its own, no metadata, and not rotated.
    policy = ("enabled", "allowed_ips", "rate_limit", "metadata", "replaced_by")
    for key in listing.json["data"]:
        assert [key[field] for field in policy] == [True, [], None, {}, None], key
    assert client.get("/api/keys?enabled=true", auth=(sdk, "")).json["total_count"] == 3


def insert_first_revision_keys(engine: sa.Engine) -> None:
    """Rows as the first revision's tables hold them, written without today's models."""
    organizations = sa.table(
        "organizations",
        sa.column("id", sa.Integer),
        sa.column("name", sa.String),
        sa.column("created", sa.DateTime),
    )
    api_keys = sa.table(
        "api_keys",
        *(sa.column(name, sa.Integer) for name in ("id", "organization_id", "scope_bits")),
        *(sa.column(name, sa.String) for name in ("identifier", "name", "kind")),
        sa.column("digest", sa.LargeBinary),
        *(sa.column(name, sa.DateTime) for name in ("created", "updated", "last_used")),
    )
    moment = datetime(2026, 1, 2, 3, 4, 5, 6)
    with engine.begin() as connection:
        connection.execute(sa.insert(organizations).values(id=1, name="acme", created=moment))
        for number, (identifier, full_key, kind, bits) in enumerate(OLD_KEYS, start=1):
            connection.execute(
                sa.insert(api_keys).values(
                    id=number,
                    organization_id=1,
                    identifier=identifier,
                    digest=hashlib.sha256(full_key.encode()).digest(),
                    name=f"old {kind}",
                    kind=kind,
                    scope_bits=bits,
                    created=moment,
                    updated=moment,
                    last_used=None,
                )
            )


# Revision -> how keys were written at that revision, without today's models.
# 0002 added key_counts, which its triggers keep: rows are stored as before. 0003 added
# nullable columns, which the previous version of the service never writes: rows stored
# as before still authenticate, never expire, and show created_by null. 0004 added columns
# with defaults, which a row written without them takes. 0005 added key_usage, a table of its
# own: keys are stored as before. 0006 added nullable quota columns: rows stored without them
# have no quota. 0007 added nullable columns to organizations (no policy): keys are stored as
# before. 0008 rewrote values of allowed_ips: keys are stored as before. 0009 added nullable
# columns to audit_events: keys are stored as before. 0010 added the
# webhooks' tables: keys are stored as before. 0011 added the identities' table and two
# columns of api_keys with defaults (no identity, bound by nothing): keys are stored as before.
# 0012 added idempotent_answers, a table of its own: keys are stored as before. 0013 added a
# nullable column (an imported key's shown form): keys stored without it are shown as before.
# 0014 added hosts, 0015 usage_batches and 0016 retired_keys, tables of their own: keys are
# stored as before. 0017 rewrote imported keys' shown forms: keys are stored as before. 0018
# added quota_grants, a table of its own, and 0019 columns of audit_events: keys are stored
# as before.
STORE_KEYS_AT = {
    "0001": insert_first_revision_keys,
    "0002": insert_first_revision_keys,
    "0003": insert_first_revision_keys,
    "0004": insert_first_revision_keys,
    "0005": insert_first_revision_keys,
    "0006": insert_first_revision_keys,
    "0007": insert_first_revision_keys,
    "0008": insert_first_revision_keys,
    "0009": insert_first_revision_keys,
    "0010": insert_first_revision_keys,
    "0011": insert_first_revision_keys,
    "0012": insert_first_revision_keys,
    "0013": insert_first_revision_keys,
    "0014": insert_first_revision_keys,
    "0015": insert_first_revision_keys,
    "0016": insert_first_revision_keys,
    "0017": insert_first_revision_keys,
    "0018": insert_first_revision_keys,
    "0019": insert_first_revision_keys,
}


def test_imported_keys_shown_by_a_part_of_their_secret_are_shown_by_their_digest(
    app_on, new_database
):
    """0017: what 0013's service stored (8 characters and `...`) becomes the digest's form,
    the prefix kept; `imported:` forms and native keys (no shown form) are left."""
    database = new_database()
    app = app_on(database)
    digest = hashlib.sha256(b"any").digest()
    stored = {1: "Zq8Rk2vN...", 2: "sk_live_...", 3: "imported:0123abcd"}
    identifiers = [identifier for identifier, *_ in OLD_KEYS]
    with app.app_context():
        command.upgrade(alembic_config(), "0016")
        insert_first_revision_keys(db.engine)
        with db.engine.begin() as connection:
            for key_id, shown in stored.items():
                connection.execute(
                    sa.text("UPDATE api_keys SET shown = :shown, digest = :digest WHERE id = :id"),
                    {"shown": shown, "digest": bytes([key_id]) + digest[1:], "id": key_id},
                )
            # Key 1 made key 2 (an imported key's identifier, as 0013's service wrote it).
            connection.execute(
                sa.text("UPDATE api_keys SET created_by = :maker WHERE id = 2"),
                {"maker": identifiers[0]},
            )
            connection.execute(
                sa.text(
                    "INSERT INTO audit_events (organization_id, at, action, actor, target,"
                    " details) VALUES (1, :at, 'key.created', :actor, :target, '{}')"
                ),
                {
                    "at": datetime(2026, 1, 2),
                    "actor": identifiers[0] + "...",
                    "target": identifiers[1] + "...",
                },
            )
    upgrade(app)
    with app.app_context(), db.engine.connect() as connection:
        rows = dict(connection.execute(sa.text("SELECT id, shown FROM api_keys")).all())
        makers = dict(connection.execute(sa.text("SELECT id, created_by FROM api_keys")).all())
        [event] = connection.execute(sa.text("SELECT actor, target FROM audit_events")).all()
    assert makers[2] == rows[1]
    assert tuple(event) == (rows[1], rows[2])
    hexes = {key_id: (bytes([key_id]) + digest[1:]).hex() for key_id in stored}
    assert rows[1] == "imported:" + hexes[1][:8]
    assert rows[2] == "sk_live_" + hexes[2][:4] + "..."
    assert rows[3] == "imported:0123abcd"


def test_allowed_ips_stored_in_ipv4_mapped_form_are_rewritten_in_ipv4_form(app_on, new_database):
    """0008: what 0007's service stored as it was given is what today's stores (an IPv4-mapped
    address in IPv4 form); other entries and other keys are left as they were."""
    database = new_database()
    app = app_on(database)
    stored = {
        1: ["::ffff:10.0.0.1/128", "2001:db8::/32", "::ffff:10.0.0.0/104", "10.0.0.1/32"],
        2: ["192.0.2.0/24", "::1/128"],
        3: [],
    }
    with app.app_context():
        command.upgrade(alembic_config(), "0007")
        insert_first_revision_keys(db.engine)
        api_keys = sa.table("api_keys", sa.column("id", sa.Integer), sa.column("allowed_ips"))
        with db.engine.begin() as connection:
            for key_id, entries in stored.items():
                connection.execute(
                    sa.text("UPDATE api_keys SET allowed_ips = :entries WHERE id = :id"),
                    {"entries": json.dumps(entries), "id": key_id},
                )
    upgrade(app)
    with app.app_context(), db.engine.connect() as connection:
        rows = dict(connection.execute(sa.select(api_keys.c.id, api_keys.c.allowed_ips)).all())
    found = {
        key_id: entries if isinstance(entries, list) else json.loads(entries)
        for key_id, entries in rows.items()
    }
    assert found == {
        1: ["10.0.0.1/32", "2001:db8::/32", "10.0.0.0/8"],
        2: ["192.0.2.0/24", "::1/128"],
        3: [],
    }


def test_events_recorded_before_0009_read_with_null_names(app_on, new_database):
    """A name recorded now cannot be made up for an older event (its key may be gone or
    renamed since): such events show null names, and new ones name their keys."""
    database = new_database()
    app = app_on(database)
    with app.app_context():
        command.upgrade(alembic_config(), "0008")
        insert_first_revision_keys(db.engine)
        events = sa.table(
            "audit_events",
            *(sa.column(name, sa.String) for name in ("action", "actor", "target")),
            sa.column("organization_id", sa.Integer),
            sa.column("at", sa.DateTime),
            sa.column("details", sa.JSON),
        )
        with db.engine.begin() as connection:
            connection.execute(
                sa.insert(events).values(
                    organization_id=1,
                    at=datetime(2026, 1, 2, 3, 4, 5),
                    action="key.deleted",
                    actor="operator",
                    target="ak_gonegonegone...",
                    details={},
                )
            )
    upgrade(app)
    client = app.test_client()
    sdk = OLD_KEYS[0][1]
    client.put(f"/api/keys/{OLD_KEYS[2][0]}", json={"name": "renamed"}, auth=(sdk, ""))
    newest, old = client.get("/api/audit", auth=(sdk, "")).json["data"]
    assert (old["target"], old["target_name"], old["actor_name"]) == (
        "ak_gonegonegone...",
        None,
        None,
    )
    assert (newest["target_name"], newest["actor_name"]) == ("renamed", "old sdk_integration")


def test_events_recorded_before_0019_are_given_the_identities_of_their_keys(app_on, new_database):
    """A key of an identity reads its identity's events alone: those recorded before 0019
    are given the identity of the key (or identity) they name, when it still exists."""
    database = new_database()
    app = app_on(database)
    upgrade(app)
    with app.app_context():
        _, keys = operator.create_organization("acme")
    [sdk] = [full_key for key, full_key in keys if key.kind == "sdk_integration"]
    client = app.test_client()
    made = client.post("/api/identities", json={"external_id": "partner"}, auth=(sdk, ""))
    body = {"name": "p", "kind": "sdk_integration", "identity": "partner"}
    partner = client.post("/api/keys", json=body, auth=(sdk, "")).json["key"]
    client.post("/api/keys", json=body | {"identity": None}, auth=(sdk, ""))
    before = client.get("/api/audit", auth=(partner, "")).json
    with app.app_context():
        command.downgrade(alembic_config(), "0018")
    upgrade(app)
    after = client.get("/api/audit", auth=(partner, "")).json
    assert [e["action"] for e in after["data"]] == ["key.created", "identity.created"]
    assert after == before
    assert after["data"][1]["target"] == made.json["id"]


def test_org_create_on_a_brand_new_sqlite_file_needs_no_separate_step(app_on, tmp_path):
    database = tmp_path / "not yet" / "made.sqlite3"
    app = app_on(database)
    keys = make_org(app)
    assert_current(database)
    client = app.test_client()
    assert client.get("/api/keys", auth=(keys["sdk_integration"], "")).status_code == 200
    assert client.get("/healthz").status_code == 200


def test_key_create_on_a_brand_new_sqlite_file_needs_no_separate_step(app_on, tmp_path):
    """The schema is made first, so the refusal is about the organization, not a table."""
    database = tmp_path / "made.sqlite3"
    app = app_on(database)
    result = app.test_cli_runner().invoke(
        args=["keys", "create", "--org", "acme", "--kind", "telemetry", "--name", "t"]
    )
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "acme" in result.stderr and "table" not in result.stderr, result.stderr
    assert_current(database)


@needs_postgresql
def test_cli_on_a_postgresql_database_not_yet_upgraded_says_to_run_db_upgrade(app_on, new_database):
    app = app_on(new_database())
    result = app.test_cli_runner().invoke(args=["org", "create", "acme"])
    assert result.exit_code == 1
    assert "flask --app app db upgrade" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_database_behind_the_code_is_refused_until_upgraded(app_on, new_database):
    app = app_on(new_database())
    with pytest.raises(SchemaNotCurrent, match=r"no schema.*flask --app app db upgrade"):
        require_current_schema(app)
    upgrade(app)
    require_current_schema(app)  # current: nothing to say
    with app.app_context():
        command.downgrade(alembic_config(), "base")
    with pytest.raises(SchemaNotCurrent, match="flask --app app db upgrade"):
        require_current_schema(app)


@needs_postgresql
def test_start_on_postgresql_checks_the_schema_and_changes_nothing(app_on, new_database):
    """What a server start runs first: only SQLite is upgraded by the server itself."""
    database = new_database()
    app = app_on(database)
    with pytest.raises(SchemaNotCurrent):
        upgrade_embedded(app)
    assert tables_and_revision(database) == (set(), None)


REBUILD_ORGANIZATIONS = '''
"""A later revision that rebuilds the table every key refers to."""

import sqlalchemy as sa
from alembic import op

revision = "9001"
down_revision = "{head}"
branch_labels = None
depends_on = None


def rebuild():
    """SQLite copies the table; other databases alter it in place."""
    return "always" if op.get_context().dialect.name == "sqlite" else "auto"


def upgrade():
    with op.batch_alter_table("organizations", recreate=rebuild()) as batch:
        batch.add_column(sa.Column("note", sa.String(length=20), nullable=True))
    {extra}


def downgrade():
    with op.batch_alter_table("organizations", recreate=rebuild()) as batch:
        batch.drop_column("note")
'''


def scripts_with_revision(folder: Path, extra: str = "") -> Config:
    """This project's migrations plus one more revision, in a folder of the test's own."""
    location = folder / "migrations"
    shutil.copytree(MIGRATIONS, location, ignore=shutil.ignore_patterns("__pycache__"))
    text = REBUILD_ORGANIZATIONS.format(head=SCRIPTS.get_current_head(), extra=extra)
    (location / "versions" / "9001_rebuild_organizations.py").write_text(text)
    config = Config(str(location / "alembic.ini"))
    config.set_main_option("script_location", str(location))
    config.attributes["configure_logging"] = False
    return config


def upgraded_to_revision_9001(app_on, new_database, tmp_path):
    """A new database at head, an organization's keys in it, then upgraded to 9001."""
    database = new_database()
    app = app_on(database)
    upgrade(app)
    keys = make_org(app)
    with app.app_context():
        command.upgrade(scripts_with_revision(tmp_path), "head")
    return database, app, keys


def test_a_revision_that_rebuilds_a_referenced_table_keeps_every_key(
    app_on, new_database, tmp_path
):
    """SQLite rebuilds a table to alter it: with foreign keys on, dropping `organizations`
    under its keys would fail half-way; the migration environment turns them off."""
    database, app, keys = upgraded_to_revision_9001(app_on, new_database, tmp_path)
    names, revision = tables_and_revision(database)
    assert revision == "9001"
    assert not [name for name in names if name.startswith("_alembic_tmp")], names
    client = app.test_client()
    listing = client.get("/api/keys", auth=(keys["sdk_integration"], ""))
    assert listing.status_code == 200, listing.json
    assert len(listing.json["data"]) == 2
    # The application's own connections still enforce the references afterwards.
    with app.app_context(), pytest.raises(sa.exc.IntegrityError):
        db.session.execute(sa.text("DELETE FROM organizations"))
        db.session.commit()


def test_a_revision_that_breaks_a_reference_is_undone_whole(app_on, new_database, tmp_path):
    database = new_database()
    app = app_on(database)
    upgrade(app)
    make_org(app)
    before = schema_and_data(database)
    orphan = "op.execute('UPDATE api_keys SET organization_id = 999')"
    with app.app_context(), pytest.raises(Exception, match=r"refer|foreign key"):
        command.upgrade(scripts_with_revision(tmp_path, orphan), "head")
    assert schema_and_data(database) == before


def test_a_database_a_newer_version_upgraded_is_served_with_a_warning(
    app_on, new_database, tmp_path, caplog
):
    """A rolling deploy: the new version's `db upgrade` ran, old workers still start."""
    database, app, keys = upgraded_to_revision_9001(app_on, new_database, tmp_path)
    before = schema_and_data(database)
    require_current_schema(app)
    upgrade_embedded(app)
    assert "revision 9001, newer than this version" in caplog.text
    assert schema_and_data(database) == before
    client = app.test_client()
    assert client.get("/api/keys", auth=(keys["sdk_integration"], "")).status_code == 200
