"""GET /healthz: no authentication; 200 when the database answers, 503 when it does not, or
when this host counts its limits in its own file while another host serves the same
database (app/serving/hosts.py).
Its `counts` says whether the limits are counted where they should be: "ok", "degraded"
while Redis does not answer (app/access/limits.py: rate limits counted in this host's file,
quotas refused), or "rebuilding" while Redis answers without the quotas' counts, which are
rebuilt from the database (app/access/rebuild.py; quotas refused meanwhile): neither is a
reason to take the host out of service."""

from __future__ import annotations

from flask import Blueprint, current_app
from sqlalchemy.exc import SQLAlchemyError

from app.extensions import db
from app.http.errors import RETRY_SHORTLY, ApiError
from app.http.operations import ANY_REQUEST, Operation, documented
from app.serving import hosts
from app.storage import queries

bp = Blueprint("health", __name__)


@bp.get("/healthz")
@documented(
    Operation(
        "Health",
        "200 when the database answers, 503 when it does not. No authentication. `counts`:"
        ' "degraded" while the limits\' storage (Redis) does not answer, "rebuilding" while'
        " Redis answers without the quotas' counts, which are rebuilt from the database.",
        200,
        "The database answers.",
        ANY_REQUEST,
        response={
            "type": "object",
            "properties": {
                "status": {"const": "ok"},
                "counts": {"enum": ["ok", "degraded", "rebuilding"]},
            },
            "required": ["status", "counts"],
        },
        secured=False,
    )
)
def healthz():
    try:
        # Reads a real table: a database without its schema is not healthy. Whether an
        # organization exists does not matter here.
        queries.has_organization()
    except SQLAlchemyError:
        current_app.logger.warning("health check: the database does not answer", exc_info=True)
        db.session.rollback()
        raise ApiError(
            503, "unavailable", "The database does not answer.", headers=[RETRY_SHORTLY]
        ) from None
    if apart := hosts.apart():
        raise ApiError(503, "unavailable", apart, headers=[RETRY_SHORTLY])
    state = current_app.extensions.get(hosts.COUNTS_STATE)
    return {"status": "ok", "counts": "ok" if state is None else state()}
