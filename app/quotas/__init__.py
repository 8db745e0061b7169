"""A key's quota (CONTRACT.md section 21): so many allowed uses per UTC calendar period,
counted where every limit is (app/counting.py), judged by app/policy.py after the rate
limit; its periods (periods.py), and the grants of more (or fewer) uses (views.py,
service.py)."""
