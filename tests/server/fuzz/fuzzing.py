"""Fuzzing a real gunicorn with schemathesis, from the document it serves at /openapi.json:
what the three modules of this folder share (`test_with_a_key.py`, `test_without_a_key.py`,
`test_sequences.py`), each with a server of its own (conftest.py), so that the suite's
processes run them side by side.

Every operation gets valid and invalid requests, with a managing key, without one, and
with a key of one scope; then create/get/update/delete run in sequences that follow links
from the create response to the new key. Every answer must be no 5xx, a status the
document lists for the operation, with a documented content type, and headers and a body
that match the document. Afterwards the database is consistent: the list's total_count
matches the rows, and every listed key can be fetched.

FUZZ_EXAMPLES (default 25) bounds the examples per operation and generation mode, and
half as many sequences of at most 10 calls each. 25, not 40 since this turn: the two
fuzz modules were the suite's longest tests (398 s and 316 s of a 532 s `make test`);
`FUZZ_EXAMPLES=200 make test` searches deeper.
"""

from __future__ import annotations

import base64
import os

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.server.conftest import REQUEST_TIMEOUT

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))


@schemathesis.check
def no_server_error_but_an_unknown_codings_501(ctx, response, case) -> bool | None:
    """schemathesis's not_a_server_error, but for the 501 that HTTP/1.1 asks of a server that
    does not know a transfer coding the request names (RFC 9112, section 6.1), which the
    document lists for every operation: the fuzzer invents a Transfer-Encoding header at
    times, and gunicorn answers it so (app/serving/gunicorn_errors.py)."""
    named = {name.lower(): value for name, value in (case.headers or {}).items()}
    coding = named.get("transfer-encoding", "chunked").strip().lower()
    if response.status_code == 501 and coding != "chunked":
        return None
    return not_a_server_error(ctx, response, case)


CHECKS = [
    no_server_error_but_an_unknown_codings_501,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,  # a real server on a shared machine: time is noisy
    database=None,  # every run starts afresh; nothing is written under .hypothesis/
    # No shrinking: a failure is reported with its first example, which is enough to
    # reproduce it, and shrinking against a server costs minutes.
    phases=[Phase.explicit, Phase.generate],
    # Generated bodies and strings are large by design; the server, not the strategy, is
    # under test.
    suppress_health_check=list(HealthCheck),
)
WORKFLOW_SETTINGS = settings(SETTINGS, max_examples=max(1, EXAMPLES // 2), stateful_step_count=10)
# The limits stay on (their code runs on every request, and 429 is documented), set high
# enough that the fuzzer's thousands of requests, most of them without a valid key, are
# answered by the service rather than by the limit.
SERVER_ENV = {"RATELIMIT_AUTH_FAILURES": "100000/minute", "RATELIMIT_PER_KEY": "100000/minute"}


def basic(key: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{key}:".encode()).decode()}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


# Test-only links from the create response to the operations on the new key, by its full
# value. The served document has none: schemathesis's command line infers these links from
# the create response's Location (the identifier), and links of its own by full value
# would have it take the two names of one key for two resources (and report a key
# deleted under one name as "created resource not found" under the other).
LINKS = {
    f"{operation}Key": {
        "operationId": f"{operation.lower()}_key",
        "parameters": {"reference": "$response.body#/key"},
    }
    for operation in ("Get", "Update", "Delete")
}


def fuzz_operations(
    api, headers: dict[str, str], modes=tuple(GenerationMode), paths: set[str] | None = None
) -> None:
    """Every operation (or those of `paths`), valid then invalid examples, each sent with
    `headers`."""
    for result in api.get_all_operations():
        operation = result.ok()
        if paths is not None and operation.path not in paths:
            continue
        # An operation with neither parameters nor body has no input to make invalid.
        has_input = bool(operation.body) or any(operation.iter_parameters())
        for mode in modes if has_input else [GenerationMode.POSITIVE]:

            @SETTINGS
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case):
                case.call_and_validate(headers=headers, checks=CHECKS, timeout=REQUEST_TIMEOUT)

            run()


def workflow(api, headers: dict[str, str]):
    """Sequences of calls that follow the links schemathesis infers from the create
    response's Location (create, then get, update or delete the new key), each sent with
    `headers` and checked as above."""

    # The keys' operations only: the links a Location header lets schemathesis infer for
    # the identities' and webhooks' creates would make sequences whose replay depends on
    # what earlier examples left on the server (an external id taken, 20 endpoints).
    keys = api.include(path_regex=r"^/api/keys")

    class Workflow(keys.as_state_machine()):
        def get_call_kwargs(self, case):
            return {"headers": headers, "timeout": REQUEST_TIMEOUT}

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=CHECKS, headers=headers)

    return Workflow


def assert_consistent(server, key: str) -> None:
    """The list's total_count is the organization's rows; every listed key can be read."""
    page = server.request("GET", "/api/keys?page_size=200", key)
    assert page.status == 200, page.body
    listed = page.json()
    [(rows,)] = server.query(
        "SELECT count(*) FROM api_keys WHERE organization_id = "
        "(SELECT id FROM organizations WHERE name = 'default')"
    )
    assert listed["total_count"] == rows
    assert len(listed["data"]) == min(rows, 200)
    for shown in listed["data"]:
        got = server.request("GET", f"/api/keys/{shown['key']}", key)
        assert got.status == 200, got.body
        assert got.json()["key"] == shown["key"]
