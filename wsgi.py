"""What gunicorn serves: `gunicorn wsgi:app`."""

from app import create_app
from app.bootstrap import ensure_default_organization
from app.database import upgrade_embedded

app = create_app()
upgrade_embedded(app)
ensure_default_organization(app)
