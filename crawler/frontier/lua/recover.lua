-- Take over the tasks of a worker whose lease lapsed. KEYS workers, owner, idle; ARGV prefix,
-- me, batch. Returns task, arg, task, arg... (arg: a record task's depth, else its request).
local now = now_ms()
local out = {}
for _, worker in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  if worker ~= ARGV[2] then
    local theirs = ARGV[1] .. 'tasks:' .. worker
    for _, task in ipairs(redis.call('SPOP', theirs, ARGV[3])) do
      local _, who, arg = owner_of(redis.call('HGET', KEYS[2], task))
      if who == worker then
        redis.call('HSET', KEYS[2], task, 'q|' .. ARGV[2] .. '|' .. arg)
        redis.call('SADD', ARGV[1] .. 'tasks:' .. ARGV[2], task)
        out[#out + 1] = task
        out[#out + 1] = arg
      end
    end
    if redis.call('SCARD', theirs) == 0 then
      redis.call('ZREM', KEYS[1], worker)
      redis.call('SREM', KEYS[3], worker)
    end
    if #out > 0 then return out end
  end
end
return out
