"""What gunicorn serves: `gunicorn wsgi:app`. Importing it does no work beyond building the
application: the first start (migrations, the `default` organization) runs before the
workers start, in gunicorn.conf.py's on_starting hook (or `flask --app app first-start`)."""

from app import create_app

app = create_app()
