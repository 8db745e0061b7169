"""What other services ask of a key (CONTRACT.md section 11): forward auth for gateways and
RFC 7662 introspection for their code (views.py), and what each accepts (schemas.py)."""
