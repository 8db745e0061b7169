"""An organization's own policy (CONTRACT.md section 21): its rules and how they bound keys
(policy), what the operator's CLI and the API accept and show of it (schemas), and
GET /api/organization (views)."""
