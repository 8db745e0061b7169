"""The fuzzing modules' server and schemathesis's view of the document it serves; and no
coverage tracing while they run."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis

from tests.server.fuzz.fuzzing import LINKS, SERVER_ENV

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items) -> None:
    """pytest-cov's `no_cover` on this folder's tests: their own process runs schemathesis,
    not the application (that runs in the server), and tracing it cost half again its CPU
    (docs/contributing.md). Not under --no-cov, where pytest-cov fails on the marker."""
    if getattr(config.option, "no_cov", True):  # or without pytest-cov at all
        return
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.no_cover)


@pytest.fixture
def server(start_server):
    return start_server(workers=2, env=SERVER_ENV)


@pytest.fixture
def api(server):
    document = server.request("GET", "/openapi.json").json()
    document["paths"]["/api/keys"]["post"]["responses"]["201"]["links"] = LINKS
    api = schemathesis.openapi.from_dict(document)
    api.config.update(base_url=f"http://127.0.0.1:{server.port}")
    return api
