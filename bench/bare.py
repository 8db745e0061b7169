"""The yardstick: a bare Flask app served with the same gunicorn settings as the service."""

from __future__ import annotations

from flask import Flask

app = Flask(__name__)


@app.get("/ping")
def ping():
    return {"status": "ok"}
