-- How far the crawl is from done. KEYS queue, workers, idle. Returns requests queued, live
-- workers busy, dead workers not yet recovered.
local now = now_ms()
local busy, dead = 0, 0
local all = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) > now then
    if redis.call('SISMEMBER', KEYS[3], all[i]) == 0 then busy = busy + 1 end
  else
    dead = dead + 1
  end
end
return {redis.call('ZCARD', KEYS[1]), busy, dead}
