"""gunicorn's logger class (gunicorn.conf.py): its error and access logs with keys masked.
Only gunicorn loads this module; the application does not import gunicorn."""

from __future__ import annotations

import os
import time

from gunicorn import glogging

from app.domain import keyformat
from app.serving.logs import MaskKeys

# The line the service writes (gunicorn.conf.py's access_log_format), built directly.
LINE = '%(h)s %(t)s "%(r)s" %(s)s %(b)s %(M)sms "%(a)s"'


class GunicornLogger(glogging.Logger):
    """gunicorn's error and access logs with keys masked, whatever access_log_format asks:
    the Basic user name (which is the key) and the Authorization header are never printed,
    a key of this service in the path, query or a header shows as `<identifier>...`, and
    any other token a key could be as an imported key is shown (app/domain/lines.py)."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        for logger in (self.error_log, self.access_log):
            if not any(isinstance(f, MaskKeys) for f in logger.filters):
                # The workers' KEY_PREFIX, as the environment gives it to them.
                logger.addFilter(MaskKeys(os.environ.get("KEY_PREFIX") or keyformat.DEFAULT_PREFIX))

    def _get_user(self, environ) -> None:
        """The Basic user name is the key: not decoded at all (`%(u)s` shows `-`)."""
        return None

    def access(self, resp, req, environ, request_time) -> None:
        """The service's line, built from the five things it shows, costs a sixth of
        gunicorn's atoms (every header and environ entry, then a format over them); any
        other access_log_format goes through gunicorn's. Both pass the mask."""
        if not self.access_log_enabled:
            return
        if self.cfg.access_log_format != LINE:
            super().access(resp, req, environ, request_time)
            return
        status = resp.status
        line = '%s %s "%s %s %s" %s %s %sms "%s"' % (  # noqa: UP031 (gunicorn's own form)
            environ.get("REMOTE_ADDR", "-"),
            time.strftime("[%d/%b/%Y:%H:%M:%S %z]"),
            environ["REQUEST_METHOD"],
            environ["RAW_URI"],
            environ["SERVER_PROTOCOL"],
            status.split(None, 1)[0] if isinstance(status, str) else status,
            resp.sent if getattr(resp, "sent", None) is not None else "-",
            request_time.seconds * 1000 + request_time.microseconds // 1000,
            environ.get("HTTP_USER_AGENT", "-"),
        )
        self.access_log.info(line)

    def atoms(self, resp, req, environ, request_time) -> dict:
        atoms = super().atoms(resp, req, environ, request_time)
        for name in atoms:
            if "authorization" in name:
                atoms[name] = "-"
        return atoms
