"""The API Keys Service. create_app() builds the application (app/factory.py, step by
named step). The package imports nothing more, so that gunicorn's master loads its logger
class (app/serving/gunicorn_logger.py) without the application, which only its workers build."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """The application, configured by `test_config` over instance/config.py and the
    environment (app/config.py)."""
    from app import factory  # here: the package stays light see above

    return factory.create_app(test_config)
