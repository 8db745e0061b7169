-- Any method, with BENCH_AUTH (base64 of "<key>:") as HTTP Basic credentials.
wrk.headers["Authorization"] = "Basic " .. os.getenv("BENCH_AUTH")
