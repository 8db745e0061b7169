-- PUT /api/keys/<identifier>: a new name every request, so that every request writes.
local counter = 0
wrk.headers["Authorization"] = "Basic " .. os.getenv("BENCH_AUTH")
wrk.headers["Content-Type"] = "application/json"

request = function()
  counter = counter + 1
  local body = '{"name": "renamed ' .. counter .. '"}'
  return wrk.format("PUT", nil, nil, body)
end
