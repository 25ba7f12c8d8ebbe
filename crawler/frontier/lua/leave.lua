-- Leave at once. KEYS workers, idle; ARGV prefix, me. The tasks still held go to the others
-- now (a lease that has already lapsed). Returns how many are held.
redis.call('SREM', KEYS[2], ARGV[2])
local held = redis.call('SCARD', ARGV[1] .. 'tasks:' .. ARGV[2])
if held == 0 then redis.call('ZREM', KEYS[1], ARGV[2]) else redis.call('ZADD', KEYS[1], 0, ARGV[2]) end
return held
