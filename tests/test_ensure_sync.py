"""The application remembers which hooks and views are plain functions
(app.ServiceFlask): its answers are Flask's, however often it is asked."""

from __future__ import annotations

import pytest
from flask import Flask


def plain() -> str:
    return "plain"


async def coroutine() -> str:
    return "coroutine"


def test_a_plain_function_is_run_as_it_is_every_time(app):
    assert app.ensure_sync(plain) is plain
    assert app.ensure_sync(plain) is plain


def test_a_coroutine_function_gets_flasks_answer_every_time(app):
    """Flask wraps it to run in a thread (or says what it needs for that); never cached as
    plain, it is never run as a plain function."""
    flask = Flask(__name__)
    for _ in range(2):
        try:
            expected = flask.ensure_sync(coroutine)
        except RuntimeError as refusal:
            with pytest.raises(RuntimeError, match=str(refusal)):
                app.ensure_sync(coroutine)
        else:
            synced = app.ensure_sync(coroutine)
            assert synced is not coroutine
            assert synced() == expected() == "coroutine"
