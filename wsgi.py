"""What gunicorn serves: `gunicorn wsgi:app`."""

import os
import sys
import traceback
from collections.abc import Callable

from app import create_app
from app.bootstrap import ensure_default_organization
from app.database import upgrade_embedded

app = create_app()


def first_start() -> None:
    """Migrations (SQLite) or the schema check, then the `default` organization if none."""
    upgrade_embedded(app)
    ensure_default_organization(app)


def in_a_child_process(work: Callable[[], None]) -> None:
    """Run `work` in a forked child and wait for it: what it imports (alembic, 10 MB) stays
    out of the worker, which then serves with less memory. Its failure is the worker's."""
    pid = os.fork()
    if pid == 0:  # the child
        status = 1
        try:
            work()
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("the first start (migrations, default organization) failed: see above")


in_a_child_process(first_start)
