"""No key in any log line: the service's loggers show its keys as `<identifier>...` and
any other token a key could be as an imported key is shown (app/domain/lines.py);
gunicorn's are set up in app/serving/gunicorn_logger.py."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from app.domain import keyformat
from app.domain.lines import Lines

if TYPE_CHECKING:  # gunicorn's master imports this module, not Flask (app/__init__.py)
    from flask import Flask

# Formats a record's traceback once, as any handler's formatter would, so that it is masked.
_TRACEBACK = logging.Formatter()


class MaskKeys(logging.Filter):
    """Rewrites a record's message, and the traceback it carries (whose exception's message
    may name a path), with every token a key could be masked, for a service whose keys
    have `prefix` (KEY_PREFIX)."""

    def __init__(self, prefix: str = keyformat.DEFAULT_PREFIX) -> None:
        super().__init__()
        self.lines = Lines(prefix)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.lines.masked(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = _TRACEBACK.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.lines.masked(record.exc_text)
        return True


def register(app: Flask) -> None:
    """Mask the application's own log (server faults name the path, which may hold a full
    key) and the development server's request log."""
    for logger in (app.logger, logging.getLogger("werkzeug")):
        if not any(isinstance(f, MaskKeys) for f in logger.filters):
            logger.addFilter(MaskKeys(app.config["KEY_PREFIX"]))
