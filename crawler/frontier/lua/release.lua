-- Release the tasks this worker holds, running or queued. KEYS owner; ARGV prefix, me, task...
-- Returns how many were released.
local mine, n = ARGV[1] .. 'tasks:' .. ARGV[2], 0
for i = 3, #ARGV do
  local _, worker = owner_of(redis.call('HGET', KEYS[1], ARGV[i]))
  if worker == ARGV[2] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('SREM', mine, ARGV[i])
    n = n + 1
  end
end
return n
