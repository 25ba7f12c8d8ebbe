-- Sign with a key. KEYS workers, signers; ARGV me, key id. Returns the live worker already
-- signing with that key, or false: then this worker is.
local now = now_ms()
local holder = redis.call('HGET', KEYS[2], ARGV[2])
if holder and holder ~= ARGV[1] then
  local lease = redis.call('ZSCORE', KEYS[1], holder)
  if lease and tonumber(lease) > now then return holder end
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
return false
