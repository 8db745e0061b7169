"""Identities (docs/design.md, "Identities"): whoever holds keys, in an organization's own terms,
with limits that bind every key it holds as one count. The blueprint at /api/identities
(views.py), its bodies (schemas.py) and its rules (service.py)."""
