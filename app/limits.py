"""Abuse limits on the key-management API, counted by Flask-Limiter.

- failed authentications per client address (RATELIMIT_AUTH_FAILURES): once an address
  has failed that often in the period, its requests get 429 until the period ends, valid
  keys included, so that guessing cannot go on;
- requests per key (RATELIMIT_PER_KEY): only authenticated requests count, so nobody can
  spend another key's allowance by naming its public identifier.
"""

from __future__ import annotations

from flask import Blueprint, current_app
from flask.wrappers import Response
from flask_limiter.util import get_remote_address

from app import keyformat
from app.auth import presented_key
from app.extensions import limiter


def _presented_identifier() -> str:
    key = presented_key()
    return keyformat.identifier_of(key) if key and keyformat.is_full_key(key) else "-"


def _failed_authentication(response: Response) -> bool:
    return response.status_code == 401


def _authenticated(response: Response) -> bool:
    return response.status_code != 401


def _auth_failures_rate() -> str:
    return current_app.config["RATELIMIT_AUTH_FAILURES"]


def _per_key_rate() -> str:
    return current_app.config["RATELIMIT_PER_KEY"]


def protect(bp: Blueprint) -> None:
    """Put both limits on every route of `bp` (once, where the blueprint is made)."""
    limiter.shared_limit(
        _auth_failures_rate,
        scope="auth-failures",
        key_func=get_remote_address,
        deduct_when=_failed_authentication,
        error_message="Too many failed authentications from this address; retry later.",
    )(bp)
    limiter.shared_limit(
        _per_key_rate,
        scope="per-key",
        key_func=_presented_identifier,
        deduct_when=_authenticated,
        error_message="Too many requests with this key; retry later.",
    )(bp)
