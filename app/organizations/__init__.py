"""An organization's own policy (docs/design.md, "Organization policy"): its rules and how they
bound keys (policy), what the operator's CLI and the API accept and show of it (schemas), and
GET /api/organization (views)."""
