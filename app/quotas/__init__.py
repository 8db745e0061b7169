"""A key's quota (docs/design.md, "Quotas"): so many allowed uses per UTC calendar period
(app/domain/periods.py), counted where every limit is (app/access/counting, through
app/access/limits.py), judged by app/access/policy.py after the rate limit; what a key object
shows of it and the grants of more (or fewer) uses (service.py, served by
POST /api/keys/<key>/quota in app/keys/views.py), and how a quota is written (schemas.py)."""
