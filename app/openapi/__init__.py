"""The OpenAPI document, assembled from the views, and GET /openapi.json and /docs that serve it."""
