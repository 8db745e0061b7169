"""GET /healthz: no authentication; 200 when the database answers, 503 when it does not."""

from __future__ import annotations

from flask import Blueprint, current_app
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from app.errors import RETRY_SHORTLY, ApiError
from app.extensions import db
from app.models import Organization

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    try:
        # A real table, so that a database without its schema is not called healthy.
        db.session.execute(select(Organization.id).limit(1))
    except SQLAlchemyError:
        current_app.logger.warning("health check: the database does not answer", exc_info=True)
        db.session.rollback()
        raise ApiError(
            503, "unavailable", "The database does not answer.", headers=[RETRY_SHORTLY]
        ) from None
    return {"status": "ok"}
