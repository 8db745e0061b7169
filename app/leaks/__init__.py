"""Reports of leaked keys (docs/design.md, "Leaked keys"): POST /api/revoke (views.py) and what
it accepts (schemas.py)."""
