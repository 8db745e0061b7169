"""Webhooks (docs/design.md, "Webhooks"): an organization's endpoints (views, schemas, service),
where they may lead (targets), how a delivery is signed (signatures), and the sender thread
of each worker that delivers the events app/audit/outbox.py writes."""
