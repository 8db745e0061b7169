"""The MCP server: POST /mcp (views.py), the SDK's server made lazily per worker (server.py)
and its tools, twins of the REST operations (tools.py)."""

# Where a request's environ carries its caller (views.py) to the tool it calls (server.py).
CALLER = "api_keys.caller"
# The tools that make a key: their calls spend the caller's quota, as their REST twins do
# (the other tools manage keys, which spends only the rate limits; tools.py marks them).
MAKING_TOOLS = frozenset({"create_key", "rotate_key"})
