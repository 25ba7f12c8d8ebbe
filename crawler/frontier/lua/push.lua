-- Queue a task's request. KEYS queue, owner, dupefilter; ARGV prefix, me, task, arg, score,
-- member, fingerprint. A request with a fingerprint passes scrapy-redis's duplicate filter,
-- and a task no claim created (arg: its request) gets this worker as its owner, in the same
-- step as it is queued: no worker can die between the three. Returns 1 queued, 0 filtered.
if ARGV[7] ~= '' and redis.call('SADD', KEYS[3], ARGV[7]) == 0 then return 0 end
if ARGV[4] ~= '' and redis.call('HSETNX', KEYS[2], ARGV[3], 'q|' .. ARGV[2] .. '|' .. ARGV[4]) == 1 then
  redis.call('SADD', ARGV[1] .. 'tasks:' .. ARGV[2], ARGV[3])
end
redis.call('ZADD', KEYS[1], ARGV[5], ARGV[6])
return 1
