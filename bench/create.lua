-- POST /api/keys: a new custom key per request.
wrk.method = "POST"
wrk.headers["Authorization"] = "Basic " .. os.getenv("BENCH_AUTH")
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"name": "bench key", "kind": "custom", "scopes": ["monitor:read", "site:read"]}'
