"""The unbound extension objects, bound to an application in create_app. Flask-Migrate is
bound only when migrations are needed (app/storage/database.py: register_migrations); the abuse
limits are the application's own (app/access/limits.py)."""

from __future__ import annotations

from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import MetaData
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    # Named constraints, so that migrations can refer to them on every database.
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(table_name)s_%(column_0_N_name)s",
            "uq": "uq_%(table_name)s_%(column_0_N_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


# Objects stay readable after commit: a response is dumped from them without a reload.
db = SQLAlchemy(model_class=Base, session_options={"expire_on_commit": False})
