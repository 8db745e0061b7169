"""No full key in any log line: the service's and gunicorn's loggers show keys as
`<identifier>...`."""

from __future__ import annotations

import logging

from flask import Flask
from gunicorn import glogging

from app import keyformat


class MaskKeys(logging.Filter):
    """Rewrites a record's message with every key-shaped token masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = keyformat.masked(record.getMessage())
        record.args = None
        return True


def register(app: Flask) -> None:
    """Mask the application's own log (server faults name the path, which may hold a full
    key) and the development server's request log."""
    for logger in (app.logger, logging.getLogger("werkzeug")):
        if not any(isinstance(f, MaskKeys) for f in logger.filters):
            logger.addFilter(MaskKeys())


class GunicornLogger(glogging.Logger):
    """gunicorn's error and access logs with keys masked, whatever access_log_format asks:
    the Basic user name (which is the key) and the Authorization header are never printed,
    and a key in the path or query shows as `<identifier>...` (gunicorn.conf.py)."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        for logger in (self.error_log, self.access_log):
            if not any(isinstance(f, MaskKeys) for f in logger.filters):
                logger.addFilter(MaskKeys())

    def atoms(self, resp, req, environ, request_time) -> dict:
        atoms = super().atoms(resp, req, environ, request_time)
        atoms["u"] = "-"
        for name in atoms:
            if "authorization" in name:
                atoms[name] = "-"
        return atoms
