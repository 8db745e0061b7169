"""gunicorn's own refusals in the service's problem shape.

gunicorn answers a request it cannot parse, or whose request line or headers exceed its
limits, before the application sees it, with an HTML page that repeats the refused text
(which may hold a key). gunicorn.conf.py replaces that page with a problem+json body
whose detail is fixed: the same shape as every other error, and nothing of the request.
"""

from __future__ import annotations

import json

from gunicorn import util

from app.http import errors

DETAILS = {
    **errors.DETAILS,
    400: "The request is not valid HTTP/1.1.",
    403: "The request is not allowed.",
    414: "The request line is longer than this server accepts.",
    417: "The request's Expect header cannot be met.",
    431: "The request's headers are larger than this server accepts.",
    501: "The request's transfer coding is not supported.",
}


def write_problem(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn.util.write_error's replacement; `mesg`, which quotes the request, is left
    out (gunicorn's warning log line, masked by app/serving/gunicorn_logger.py, keeps it)."""
    document = errors.problem_document(
        status_int, errors.CODES.get(status_int, "error"), DETAILS.get(status_int, reason)
    )
    body = json.dumps(document, separators=(",", ":")).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: {errors.PROBLEM_JSON}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


def install() -> None:
    """Every worker forked afterwards answers gunicorn's refusals with write_problem."""
    util.write_error = write_problem
