"""The keys blueprint: the five key-management endpoints at /api/keys."""
