"""Reports of leaked keys (CONTRACT.md section 12): POST /api/revoke (views.py) and what
it accepts (schemas.py)."""
