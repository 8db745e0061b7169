-- POST the JSON body BENCH_BODY with the key's Basic credentials (rotate, for example).
wrk.method = "POST"
wrk.headers["Authorization"] = "Basic " .. os.getenv("BENCH_AUTH")
wrk.headers["Content-Type"] = "application/json"
wrk.body = os.getenv("BENCH_BODY")
