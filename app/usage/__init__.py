"""A key's usage, as its owners read it: GET /api/keys/<key>/usage (views.py), its
arguments and answer (schemas.py) and the read of the counts (service.py). The counting
itself is app/usage/counter.py, below the doors that count, with shared.py where the limits
count in Redis."""
