-- POST /mcp: the JSON-RPC message BENCH_BODY, with BENCH_KEY as a Bearer token.
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_KEY")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.body = os.getenv("BENCH_BODY")
