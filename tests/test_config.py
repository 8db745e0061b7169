"""Configuration from the environment (docs/operations.md's table):
DATABASE_URL, KEY_PREFIX and LAST_USED_RESOLUTION override the defaults, and a value that
makes no sense stops the service at start with a message naming what is wrong."""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from app.config import ENVIRONMENT
from app.extensions import db
from tests.processes import PROJECT


@pytest.fixture
def environment(monkeypatch, tmp_path):
    """A clean environment: none of the service's variables set, unless a test sets them."""
    for variable in ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


@pytest.fixture
def start(environment, make_app):
    """create_app() as wsgi.py calls it: everything from the environment."""
    return make_app


@pytest.fixture
def database_url(environment, tmp_path) -> Path:
    path = tmp_path / "from-the-environment.sqlite3"
    environment.setenv("DATABASE_URL", f"sqlite:///{path}")
    return path


def org_create(app, name: str = "acme") -> dict:
    """`flask org create NAME --json`: the organization's keys by kind."""
    result = app.test_cli_runner().invoke(args=["org", "create", name, "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    return {key["kind"]: key["key"] for key in json.loads(result.stdout)["keys"]}


def organizations(database: Path) -> list[str]:
    with closing(sqlite3.connect(database)) as connection:
        return [name for (name,) in connection.execute("SELECT name FROM organizations")]


def test_default_database_is_sqlite_in_the_instance_folder(start):
    app = start()
    with app.app_context():
        url = db.engine.url  # not connected: the repository's own database is left alone
    assert url.get_backend_name() == "sqlite"
    assert url.database is not None
    assert Path(url.database).parent == Path(app.instance_path)


def test_database_url_selects_the_database(start, database_url):
    app = start()
    keys = org_create(app)
    assert organizations(database_url) == ["acme"]
    response = app.test_client().get("/api/keys", auth=(keys["sdk_integration"], ""))
    assert response.status_code == 200


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "postgresql+psycopg"])
def test_postgresql_urls_use_psycopg_3_the_driver_installed_with_the_service(
    start, environment, scheme
):
    environment.setenv("DATABASE_URL", f"{scheme}://keys:p%40ss@db.example:5432/keys")
    app = start()
    with app.app_context():
        url = db.engine.url  # not connected
    assert (url.drivername, url.password, url.host, url.database) == (
        "postgresql+psycopg",
        "p@ss",
        "db.example",
        "keys",
    )


def test_key_prefix_variable_changes_the_prefix_of_new_keys(start, database_url, environment):
    environment.setenv("KEY_PREFIX", "envco_")
    app = start()
    keys = org_create(app)
    assert all(key.startswith("envco_") for key in keys.values()), keys
    sdk = keys["sdk_integration"]
    client = app.test_client()
    created = client.post(
        "/api/keys", json={"name": "n", "kind": "telemetry"}, auth=(sdk, "")
    ).json["key"]
    assert created.startswith("envco_")
    assert client.get(f"/api/keys/{created}", auth=(sdk, "")).status_code == 200


def _two_reads_of_itself(app) -> tuple[str, str]:
    """last_used as a key sees it on two reads of itself, a moment apart."""
    sdk = org_create(app)["sdk_integration"]
    client = app.test_client()
    first = client.get(f"/api/keys/{sdk}", auth=(sdk, "")).json["last_used"]
    time.sleep(0.01)
    second = client.get(f"/api/keys/{sdk}", auth=(sdk, "")).json["last_used"]
    assert first is not None
    return first, second


def test_last_used_resolution_variable_overrides_the_default(start, database_url, environment):
    environment.setenv("LAST_USED_RESOLUTION", "0")
    first, second = _two_reads_of_itself(start())
    assert second > first  # every use is written


def test_last_used_resolution_default_writes_once_a_minute(start, database_url):
    """The counterpart: without the variable, a second use within 60 s is not written."""
    first, second = _two_reads_of_itself(start())
    assert second == first


BAD_VALUES = [
    ("DATABASE_URL", "nonsense"),
    ("KEY_PREFIX", "ak-"),
    ("KEY_PREFIX", ""),
    ("KEY_PREFIX", "x" * 53),
    ("WEBHOOK_ALLOW_PRIVATE", "maybe"),
    ("WEBHOOK_RETRY_DELAYS", "5,1"),
    ("WEBHOOK_RETRY_DELAYS", "5,,10"),
    ("WEBHOOK_RETRY_DELAYS", "0"),
    ("WEBHOOK_LEASE_SECONDS", "0"),
    ("WEBHOOK_LEASE_SECONDS", "5"),  # no longer than a try: another sender could take it
    ("LAST_USED_RESOLUTION", "soon"),
    ("LAST_USED_RESOLUTION", "-1"),
    ("LAST_USED_RESOLUTION", "1.5"),
    ("LAST_USED_RESOLUTION", ""),
    ("RATELIMIT_ENABLED", "maybe"),
    ("RATELIMIT_AUTH_FAILURES", "lots"),
    ("RATELIMIT_PER_KEY", "6000 a minute"),
    ("METRICS_ENABLED", "maybe"),
    ("METRICS_TOKEN", ""),
    ("METRICS_TOKEN", "two words"),
    ("METRICS_TOKEN", "=leading"),
    ("METRICS_TOKEN", "t\u00f6ken"),
]


@pytest.mark.parametrize(("variable", "value"), BAD_VALUES)
def test_bad_value_is_refused_at_start_naming_the_variable(
    start, database_url, environment, variable, value
):
    environment.setenv(variable, value)
    with pytest.raises(Exception) as refused:  # any refusal; its message is checked below
        start()
    message = str(refused.value)
    config_key = ENVIRONMENT[variable][0]
    assert variable in message or config_key in message, message


def test_every_environment_variable_is_in_the_configuration_table_of_the_operations_page():
    page = (PROJECT / "docs" / "operations.md").read_text()
    lines = page.splitlines()
    rows = {line.split("|")[1].strip(" `") for line in lines if line.startswith("| `")}
    assert set(ENVIRONMENT) <= rows, set(ENVIRONMENT) - rows
