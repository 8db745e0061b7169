"""What other services ask of a key (docs/design.md, "Forward auth and introspection"):
forward auth for gateways and RFC 7662 introspection for their code (views.py), and what
each accepts (schemas.py)."""
