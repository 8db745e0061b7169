"""The HTTP plumbing: request bodies and arguments, error bodies, JSON, a 401's challenge, and
what a view says of itself in the OpenAPI document."""
