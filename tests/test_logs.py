"""No full key in any log line of the service's loggers."""

from __future__ import annotations

import logging
from urllib.parse import quote

import pytest

from app import create_app
from app.domain import keyformat


@pytest.mark.parametrize("logger_name", ["werkzeug", "app"])
def test_a_full_key_in_a_log_line_is_shown_as_its_identifier(app, org, caplog, logger_name):
    caplog.set_level(logging.INFO)
    logging.getLogger(logger_name).info('"GET /api/keys/%s HTTP/1.1" %s', org.sdk, 200)
    identifier = keyformat.identifier_of(org.sdk)
    assert org.sdk not in caplog.text
    assert f"/api/keys/{identifier}... HTTP/1.1" in caplog.text


def test_a_mistyped_key_is_masked_too(app, org, caplog):
    mistyped = org.sdk[:-1] + ("A" if org.sdk[-1] != "A" else "B")
    logging.getLogger("werkzeug").warning("path /api/keys/%s", mistyped)
    assert mistyped not in caplog.text
    assert keyformat.identifier_of(mistyped) + "..." in caplog.text


def escaped(text: str) -> str:
    """Every character as a percent-escape, as a client may write a path."""
    return "".join(f"%{byte:02X}" for byte in text.encode())


@pytest.mark.parametrize(
    "written",
    [escaped, lambda key: key.replace("_", "%5F"), lambda key: quote(escaped(key))],
    ids=["every character escaped", "underscore escaped", "escaped twice"],
)
def test_a_key_written_with_percent_escapes_is_masked_too(app, org, caplog, written):
    caplog.set_level(logging.INFO)
    logging.getLogger("werkzeug").info('"GET /api/keys/%s HTTP/1.1" 200', written(org.sdk))
    identifier = keyformat.identifier_of(org.sdk)
    assert f'"GET /api/keys/{identifier}... HTTP/1.1" 200' in caplog.text
    secret = org.sdk[len(identifier) :]
    for form in (secret, escaped(secret), quote(escaped(secret))):
        assert form not in caplog.text


def test_a_line_without_an_escaped_key_is_left_as_written(app, caplog):
    caplog.set_level(logging.INFO)
    logging.getLogger("werkzeug").info("GET /api/keys?name=a%20b HTTP/1.1")
    assert "GET /api/keys?name=a%20b HTTP/1.1" in caplog.text


def test_the_masking_filter_is_added_once_however_many_apps_are_made(app):
    create_app({"SQLALCHEMY_DATABASE_URI": "sqlite://"})
    assert len(logging.getLogger("werkzeug").filters) == 1
