"""GET /healthz: no authentication; 200 when the database answers, 503 when it does not."""

from __future__ import annotations

from flask import Blueprint, current_app
from sqlalchemy.exc import SQLAlchemyError

from app.extensions import db
from app.http.errors import RETRY_SHORTLY, ApiError
from app.http.operations import ANY_REQUEST, Operation, documented
from app.storage import queries

bp = Blueprint("health", __name__)


@bp.get("/healthz")
@documented(
    Operation(
        "Health",
        "200 when the database answers, 503 when it does not. No authentication.",
        200,
        "The database answers.",
        ANY_REQUEST,
        response={
            "type": "object",
            "properties": {"status": {"const": "ok"}},
            "required": ["status"],
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
    return {"status": "ok"}
