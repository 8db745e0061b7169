"""Serving: the doors' verdicts handed to what counts them, metrics, logs, health, and
gunicorn's hooks. Imports nothing on import, so that gunicorn's master can load its logger."""
