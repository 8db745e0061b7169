-- POST /api/keys/<identifier>/rotate along chains of rotations: a rotated key answers 409
-- already_rotated, so each request rotates the newest key of a chain. BENCH_TARGETS holds
-- this run's fresh keys (identifiers, comma-separated), shared out among wrk's threads;
-- each thread rotates one it holds and keeps the successor the answer names.
local dealt = 0

function setup(thread)
  -- Thread n of BENCH_THREADS holds targets n, n + BENCH_THREADS, ...
  dealt = dealt + 1
  local threads, mine, index = tonumber(os.getenv("BENCH_THREADS")), {}, 0
  for identifier in string.gmatch(os.getenv("BENCH_TARGETS"), "[^,]+") do
    if index % threads == dealt - 1 then
      table.insert(mine, identifier)
    end
    index = index + 1
  end
  thread:set("held", table.concat(mine, ","))
end

local pool = {}

function init(args)
  for identifier in string.gmatch(held, "[^,]+") do
    table.insert(pool, identifier)
  end
end

wrk.headers["Authorization"] = "Basic " .. os.getenv("BENCH_AUTH")
wrk.headers["Content-Type"] = "application/json"

function request()
  -- Empty only if a rotation failed, which stops the run anyway: a 404 says so.
  local identifier = table.remove(pool) or "none"
  return wrk.format("POST", "/api/keys/" .. identifier .. "/rotate", nil, os.getenv("BENCH_BODY"))
end

function response(status, headers, body)
  -- The new key's full value; its identifier is all but the last 38 characters.
  local full = string.match(body, '"key"%s*:%s*"([^"]+)"')
  if status == 201 and full then
    table.insert(pool, string.sub(full, 1, -39))
  end
end
