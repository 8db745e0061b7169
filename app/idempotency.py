"""Idempotent writes (docs/design.md, "Idempotent writes"): a write sent with an `Idempotency-Key`
and retried by the same caller within 24 hours answers what the first answered (its status,
body and `Location`), without being done again.

Who the caller is: the calling key's own row, by its organization, its row's id and its
identifier, which no other key is ever given (app/keys/writes.py keeps a retired key's):
no key of another organization, nor another key of the same one, nor a key made later
under a name once used, derives the same lookup. Another key of the same holder, a
rotation's successor included, is another caller: its retry is a new request.

What decides which request is the first: the primary key of models.IdempotentAnswer,
inserted as the first statement of the write's own transaction, which the write's commit
commits. Of concurrent requests with the same key one inserts it; on PostgreSQL the others'
inserts wait for that transaction, on SQLite for its write lock, and then fail (or
succeed, when the first was refused and rolled back). A request that finds the row answers
409 `idempotency_in_progress` while the first has not stored its answer, that answer once
it has, and 422 `idempotency_key_reused` when it is another request (another method, path
or body) than the first. The answer is stored in a second short transaction just after the
write's commit: a worker killed between the two leaves the row without an answer, and
retries get 409 until it is removed, 24 hours later (the write was done; the key list shows
it).

A refused request (any 4xx or 5xx) stores nothing: its claim goes with its rollback (or is
removed, if the refusal came after a commit), so that a retry may succeed.

What is stored: the lookup and the fingerprint (an HMAC of the method, the path and the
body), both derived with HKDF-SHA256 from the Idempotency-Key and the caller; and the
answer, sealed under a third key derived alike (the lookup as associated data) with
XChaCha20-Poly1305 (app/domain/sealing.py). Every answer is sealed, not only those
that hold a full key or a secret (a create, a rotation, an import, a webhook
endpoint's), so that none is in clear. Whoever reads the table without the
Idempotency-Key opens nothing; an Idempotency-Key that can be guessed (a counter, a
timestamp) protects what it seals no better than it can be guessed, so the docs ask for
a random one (a UUID).

Answers older than 24 hours are never replayed: a claim removes its own key's old row, and
each process removes every old row at most once every 10 minutes, in a transaction of its
own, before a claim.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any, NamedTuple

from flask import Response, current_app, request
from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.access import auth
from app.domain import sealing
from app.domain.credentials import Caller
from app.domain.timestamps import utcnow
from app.extensions import db
from app.http.errors import ApiError
from app.storage import database
from app.storage.models import IdempotentAnswer

HEADER = "Idempotency-Key"
# On a replayed answer, so that a client (and its logs) can tell it from a first one.
REPLAYED = "Idempotent-Replayed"
MAX_LENGTH = 255
_KEY = re.compile(f"[\\x20-\\x7e]{{1,{MAX_LENGTH}}}\\Z")
# How long an answer is replayed.
KEPT = timedelta(hours=24)
# How often a process removes the answers older than that.
PRUNE_SECONDS = 600
# The headers of an answer that a replay repeats; the others (RateLimit, Quota-Remaining)
# are the retry's own.
KEPT_HEADERS = ("Location", "Content-Type")
# Its second version: the answers sealed before with AES-GCM are never looked up again
# (a retry across that upgrade is a new request) and go within 24 hours.
_INFO = b"api-keys-service idempotent write, sealed 2"
# How many times a request looks for the first's row, which the first may remove (refused)
# between this request's failed claim and its read.
_CLAIMS = 3

_ANSWERS = IdempotentAnswer.__table__
_LOOKUP = _ANSWERS.c.lookup == bindparam("row")
_FORGET_OLD = delete(_ANSWERS).where(_LOOKUP, _ANSWERS.c.created < bindparam("before"))
_CLAIM = insert(_ANSWERS)
_STORED = select(_ANSWERS.c.fingerprint, _ANSWERS.c.answer).where(_LOOKUP)
_STORE = update(_ANSWERS).where(_LOOKUP).values(answer=bindparam("sealed"))
_RELEASE = delete(_ANSWERS).where(_LOOKUP, _ANSWERS.c.answer.is_(None))


class Answer(NamedTuple):
    """What a write answered: its status, its body as sent, the headers a replay repeats,
    and whether it is a replay."""

    status: int
    body: str
    headers: dict[str, str]
    replayed: bool = False


class _Secrets(NamedTuple):
    lookup: bytes
    sealing: bytes
    fingerprinting: bytes


def _secrets(caller: Caller, idempotency_key: str) -> _Secrets:
    """Three keys from one HKDF-SHA256 of the Idempotency-Key, salted with the caller's
    row (organization, id, identifier): the row's lookup, the answer's sealing key, the
    request's HMAC key."""
    salt = f"{caller.organization_id}/{caller.id}/{caller.identifier}".encode()
    material = sealing.hkdf_sha256(
        idempotency_key.encode("ascii"), salt=salt, info=_INFO, length=96
    )
    return _Secrets(material[:32], material[32:64], material[64:])


def checked(value: str, field: str = HEADER) -> str:
    """An Idempotency-Key as given: 1 to 255 printable ASCII characters, else 422 naming
    `field` (the header, or an MCP tool's argument)."""
    if _KEY.match(value) is None:
        message = (
            f"Must be 1 to {MAX_LENGTH} printable ASCII characters (a UUID, say), "
            "the same on every retry of one request."
        )
        raise ApiError(
            422, "validation_error", f"The request is not valid: {field}.", {field: [message]}
        )
    return value


class _Process:
    """When this process last removed the old answers (time.monotonic(); 0: not yet)."""

    pruned = 0.0


def _prune_now_and_then() -> None:
    """Every answer older than KEPT removed, at most once every PRUNE_SECONDS a process, in
    a transaction of its own (one statement, in the index's order)."""
    now = time.monotonic()
    if _Process.pruned and now - _Process.pruned < PRUNE_SECONDS:
        return
    _Process.pruned = now
    db.session.execute(delete(_ANSWERS).where(_ANSWERS.c.created < utcnow() - KEPT))
    db.session.commit()


def _claim(lookup: bytes, fingerprint: bytes) -> Any:
    """None when this request is the first with its key: its row inserted in the session's
    transaction, which the write commits. Otherwise the first's row (its fingerprint and
    sealed answer, None while it runs), or _GONE when the first removed it meanwhile."""
    now = utcnow()
    connection = database.writing()
    try:
        connection.execute(_FORGET_OLD, {"row": lookup, "before": now - KEPT})
        connection.execute(
            _CLAIM, {"lookup": lookup, "fingerprint": fingerprint, "created": now, "answer": None}
        )
    except IntegrityError:
        db.session.rollback()
        row = db.session.execute(_STORED, {"row": lookup}).first()
        db.session.rollback()
        return _GONE if row is None else row
    return None


_GONE = object()


def _replayed(row: Any, secrets: _Secrets, fingerprint: bytes) -> Answer:
    """The first request's answer, for a retry of it; 422 for another request with its key,
    409 while it runs."""
    stored_fingerprint, sealed = row
    if not hmac.compare_digest(bytes(stored_fingerprint), fingerprint):
        raise ApiError(
            422,
            "idempotency_key_reused",
            "This Idempotency-Key was used in the last 24 hours for another request (another "
            "body, method or path): send a new key for a new request.",
            {HEADER: ["Used for another request."]},
        )
    if sealed is None:
        raise ApiError(
            409,
            "idempotency_in_progress",
            "The first request with this Idempotency-Key is still running: retry shortly.",
            headers=[("Retry-After", "1")],
        )
    plain = sealing.unseal(secrets.sealing, bytes(sealed), secrets.lookup)
    stored = json.loads(plain)
    return Answer(stored["status"], stored["body"], stored["headers"], replayed=True)


def _store(secrets: _Secrets, answer: Answer) -> None:
    plain = json.dumps(
        {"status": answer.status, "body": answer.body, "headers": answer.headers}
    ).encode()
    sealed = sealing.seal(secrets.sealing, plain, secrets.lookup)
    db.session.execute(_STORE, {"row": secrets.lookup, "sealed": sealed})
    db.session.commit()


def _release(lookup: bytes) -> None:
    """A refused request's claim removed: rolled back with its transaction, or, if the
    refusal came after a commit, deleted (never an answer stored by another)."""
    db.session.rollback()
    db.session.execute(_RELEASE, {"row": lookup})
    db.session.commit()


def run(caller: Caller, idempotency_key: str, sent: bytes, work: Callable[[], Answer]) -> Answer:
    """`work()`'s answer, done once: the first request with this caller's `idempotency_key`
    does it and stores its answer (a success only); a retry within 24 hours (`sent`: the
    request as sent, the same) gets that answer again."""
    secrets = _secrets(caller, idempotency_key)
    fingerprint = hmac.new(secrets.fingerprinting, sent, hashlib.sha256).digest()
    _prune_now_and_then()
    for _ in range(_CLAIMS):
        row = _claim(secrets.lookup, fingerprint)
        if row is None:
            break
        if row is not _GONE:
            return _replayed(row, secrets, fingerprint)
    else:  # claimed and released by others each time: as busy as it gets
        raise ApiError(
            409,
            "idempotency_in_progress",
            "Other requests with this Idempotency-Key are running: retry shortly.",
            headers=[("Retry-After", "1")],
        )
    try:
        answer = work()
    except BaseException:
        _release(secrets.lookup)
        raise
    if answer.status >= 400:
        _release(secrets.lookup)
    else:
        _store(secrets, answer)
    return answer


def idempotent(view: Callable[..., Any]) -> Callable[..., Any]:
    """A view that takes `Idempotency-Key`: without one, the view as it is; with one, run()
    around it, for the authenticated caller, the request being its method, path and body."""

    @wraps(view)
    def answered(*args: Any, **kwargs: Any) -> Any:
        given = request.headers.get(HEADER)
        if given is None:
            return view(*args, **kwargs)
        idempotency_key = checked(given)
        sent = f"{request.method} {request.path}\n".encode() + request.get_data()

        def work() -> Answer:
            response = current_app.make_response(view(*args, **kwargs))
            kept = response.headers
            headers = {name: kept[name] for name in KEPT_HEADERS if name in kept}
            return Answer(response.status_code, response.get_data(as_text=True), headers)

        answer = run(auth.caller(), idempotency_key, sent, work)
        headers = answer.headers | ({REPLAYED: "true"} if answer.replayed else {})
        return Response(answer.body, answer.status, headers)

    return answered
