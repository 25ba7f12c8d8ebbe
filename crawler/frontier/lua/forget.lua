-- Forget a crawl whose archive no longer holds what it committed. KEYS commits, seen, owner,
-- dupefilter, requests, idle; ARGV prefix, run ids the archive lacks... Atomic and idempotent:
-- only while one of those runs is still listed (a worker that checked the archive before
-- another forgot the crawl forgets nothing). Returns how many claims were dropped, or -1.
local stale = false
for i = 2, #ARGV do
  if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 1 then stale = true end
end
if not stale then return -1 end
local claims = redis.call('SCARD', KEYS[2])
for _, key in ipairs(redis.call('KEYS', ARGV[1] .. 'tasks:*')) do redis.call('DEL', key) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
return claims
