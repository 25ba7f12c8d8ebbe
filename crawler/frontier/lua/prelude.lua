-- Put before every script of the ledger (crawler/frontier/client.py).

-- The Redis server's clock, in milliseconds: leases are set and read on one clock, never a worker's own.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The parts of an owner entry 'state|worker|arg' (state: q queued, r running; arg: a record
-- task's depth, or the request of a task no claim created); nothing when there is none.
local function owner_of(entry)
  return string.match(entry or '', '^(%a)|([^|]*)|(.*)$')
end
