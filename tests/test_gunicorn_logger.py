"""gunicorn.conf.py's logger class, in this process: whatever access_log_format asks for,
an access line holds neither the credentials nor a full key (tests/server checks the same
through a running gunicorn)."""

from __future__ import annotations

import base64
import runpy
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote

from gunicorn.config import Config

from app.serving.gunicorn_logger import LINE, GunicornLogger
from tests.processes import PROJECT

KEY = "ak_DVIJcZUXMfmeznSOa3WWtlPqvGQLz9P377d76K01pTtI0KIp3P"
EVERYTHING = "%(u)s|%({authorization}i)s|%({http_authorization}e)s|%(r)s|%(U)s|%(q)s|%(s)s"


def access_line(tmp_path: Path, log_format: str, authorization: str, path: str) -> str:
    tmp_path.mkdir(exist_ok=True)
    log = tmp_path / "access.log"
    config = Config()
    config.set("accesslog", str(log))
    config.set("access_log_format", log_format)
    logger = GunicornLogger(config)
    environ = {
        "REQUEST_METHOD": "GET",
        "RAW_URI": path,
        "PATH_INFO": unquote(path.split("?")[0]),  # as gunicorn decodes it
        "QUERY_STRING": path.partition("?")[2],
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_AUTHORIZATION": authorization,
    }
    request = SimpleNamespace(headers=[("AUTHORIZATION", authorization)])
    response = SimpleNamespace(status="200 OK", headers=[], sent=10)
    logger.access(response, request, environ, timedelta(milliseconds=3))
    for handler in [*logger.access_log.handlers, *logger.error_log.handlers]:
        handler.close()
    return log.read_text()


def test_an_access_line_asking_for_everything_shows_no_credential_and_no_full_key(tmp_path):
    basic = "Basic " + base64.b64encode(f"{KEY}:".encode()).decode()
    line = access_line(tmp_path, EVERYTHING, basic, f"/api/keys/{KEY}?k={KEY}")
    shown = "ak_DVIJcZUXMfme..."
    request_line = f"GET /api/keys/{shown}?k={shown} HTTP/1.1"
    assert line == f"-|-|-|{request_line}|/api/keys/{shown}|k={shown}|200\n"
    assert KEY not in line and basic not in line and "Basic" not in line


def test_a_key_written_with_percent_escapes_in_the_path_and_query_is_masked(tmp_path):
    written = KEY.replace("_", "%5F").replace("D", "%44")
    line = access_line(tmp_path, EVERYTHING, "Bearer " + KEY, f"/api/keys/{written}?k={written}")
    shown = "ak_DVIJcZUXMfme..."
    assert (
        line == f"-|-|-|GET /api/keys/{shown}?k={shown} HTTP/1.1|/api/keys/{shown}|k={shown}|200\n"
    )


def test_a_bearer_credential_that_is_not_key_shaped_is_not_shown_either(tmp_path):
    line = access_line(tmp_path, EVERYTHING, "Bearer hunter2", "/api/keys")
    assert "hunter2" not in line and "Bearer" not in line, line


def test_gunicorn_conf_uses_this_logger_and_a_format_without_the_user_name():
    settings = runpy.run_path(str(PROJECT / "gunicorn.conf.py"))
    assert settings["logger_class"] == "app.serving.gunicorn_logger.GunicornLogger"
    assert settings["accesslog"] == "-"
    assert "%(u)s" not in settings["access_log_format"]
    assert "authorization" not in settings["access_log_format"].lower()


def test_the_services_line_is_built_directly_and_reads_as_gunicorns_would(tmp_path):
    """The lean line (app.serving.gunicorn_logger.LINE) is what gunicorn's atoms give for the same
    format, key masked; a format of the operator's still goes through gunicorn's atoms."""
    settings = runpy.run_path(str(PROJECT / "gunicorn.conf.py"))
    assert settings["access_log_format"] == LINE
    path = f"/api/keys/{KEY}?page=2"
    lean = access_line(tmp_path / "lean", LINE, "Bearer " + KEY, path)
    # The same format, one space longer, is not the service's: gunicorn's own atoms.
    atoms = access_line(tmp_path / "atoms", LINE + " ", "Bearer " + KEY, path)
    timestamp = lean.split("[", 1)[1].split("]", 1)[0]
    at_another_second = atoms.split("[", 1)[1].split("]", 1)[0]
    assert lean.rstrip("\n") == atoms.replace(at_another_second, timestamp).rstrip(" \n")
    request_line = "GET /api/keys/ak_DVIJcZUXMfme...?page=2 HTTP/1.1"
    assert lean == f'127.0.0.1 [{timestamp}] "{request_line}" 200 10 3ms "-"\n'
