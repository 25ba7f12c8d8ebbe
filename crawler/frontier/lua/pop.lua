-- Take tasks over, first first. KEYS queue, owner, workers, idle; ARGV prefix, me, most.
-- Returns the queue members taken ('task\nrequest'). A task a live worker runs is dropped:
-- it was popped twice.
local now = now_ms()
local taken = {}
for _ = 1, 100 do
  local top = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #top == 0 or #taken >= tonumber(ARGV[3]) then break end
  local member = top[1]
  redis.call('ZREM', KEYS[1], member)
  local cut = string.find(member, '\n', 1, true)
  local task = cut and string.sub(member, 1, cut - 1)
  local owner = task and redis.call('HGET', KEYS[2], task)
  if owner then  -- no owner: done and committed (a stale copy), or not a task at all
    local state, worker, arg = owner_of(owner)
    local lease = tonumber(redis.call('ZSCORE', KEYS[3], worker) or '0')
    if state == 'q' or (worker ~= ARGV[2] and lease <= now) then
      if worker ~= ARGV[2] then
        redis.call('SREM', ARGV[1] .. 'tasks:' .. worker, task)
        redis.call('SADD', ARGV[1] .. 'tasks:' .. ARGV[2], task)
      end
      redis.call('HSET', KEYS[2], task, 'r|' .. ARGV[2] .. '|' .. arg)
      taken[#taken + 1] = member
    end
  end
end
if #taken > 0 then redis.call('SREM', KEYS[4], ARGV[2]) end
return taken
