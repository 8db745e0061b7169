"""marshmallow schemas: the policy the operator sets, and an organization as it is shown."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, fields, validate

from app.domain.timestamps import iso
from app.http.arguments import RateLimit
from app.organizations.policy import MAX_KEYS, MAX_LIFETIME_DAYS, Summary
from app.quotas.schemas import Quota


class PolicyChange(Schema):
    """The rules `flask org policy` changes: each a value, or null to clear it."""

    max_keys = fields.Integer(
        strict=True, allow_none=True, validate=validate.Range(min=1, max=MAX_KEYS)
    )
    max_key_lifetime_days = fields.Integer(
        strict=True, allow_none=True, validate=validate.Range(min=1, max=MAX_LIFETIME_DAYS)
    )
    default_rate_limit = fields.Nested(RateLimit, allow_none=True)
    default_quota = fields.Nested(Quota, allow_none=True)


class PolicyOutput(Schema):
    """An organization's rules; null: no such rule."""

    max_keys = fields.Integer(allow_none=True)
    max_key_lifetime_days = fields.Integer(allow_none=True)
    default_rate_limit = fields.Nested(RateLimit, allow_none=True)
    default_quota = fields.Nested(Quota, allow_none=True)


class OrganizationOutput(Schema):
    """An organization, how many keys it holds and its policy (GET /api/organization)."""

    name = fields.String()
    created = fields.String(metadata={"format": "date-time"})
    key_count = fields.Integer()
    policy = fields.Nested(PolicyOutput)


policy_change = PolicyChange()
organization_output = OrganizationOutput()


def dump(organization: Summary) -> dict[str, Any]:
    """The organization as GET /api/organization and `flask org policy --json` show it."""
    policy = organization.policy
    rules = policy._asdict() | {
        "default_rate_limit": policy.default_rate_limit,
        "default_quota": policy.default_quota,
    }
    return organization_output.dump(
        organization._replace(created=iso(organization.created), policy=rules)
    )
