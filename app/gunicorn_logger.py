"""gunicorn's logger class (gunicorn.conf.py): its error and access logs with keys masked.
Only gunicorn loads this module; the application does not import gunicorn."""

from __future__ import annotations

from gunicorn import glogging

from app.logs import MaskKeys


class GunicornLogger(glogging.Logger):
    """gunicorn's error and access logs with keys masked, whatever access_log_format asks:
    the Basic user name (which is the key) and the Authorization header are never printed,
    and a key in the path or query shows as `<identifier>...` (gunicorn.conf.py)."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        for logger in (self.error_log, self.access_log):
            if not any(isinstance(f, MaskKeys) for f in logger.filters):
                logger.addFilter(MaskKeys())

    def _get_user(self, environ) -> None:
        """The Basic user name is the key: not decoded at all (`%(u)s` shows `-`)."""
        return None

    def atoms(self, resp, req, environ, request_time) -> dict:
        atoms = super().atoms(resp, req, environ, request_time)
        for name in atoms:
            if "authorization" in name:
                atoms[name] = "-"
        return atoms
