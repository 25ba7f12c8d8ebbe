-- Claim records by suffix. KEYS seen, owner; ARGV prefix, me, depth, limit, page, suffix...
-- Returns, for each suffix: 1 claimed (its bundle task, and its page task when page is 1,
-- now belong to this worker), 0 seen before, 2 full (limit records claimed).
local out, limit, mine = {}, tonumber(ARGV[4]), ARGV[1] .. 'tasks:' .. ARGV[2]
local kinds = {'b'}
if ARGV[5] == '1' then kinds[2] = 'p' end
for i = 6, #ARGV do
  if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 1 then
    out[#out + 1] = 0
  elseif limit > 0 and redis.call('SCARD', KEYS[1]) >= limit then
    out[#out + 1] = 2
  else
    redis.call('SADD', KEYS[1], ARGV[i])
    for _, kind in ipairs(kinds) do
      redis.call('HSET', KEYS[2], kind .. ':' .. ARGV[i], 'q|' .. ARGV[2] .. '|' .. ARGV[3])
      redis.call('SADD', mine, kind .. ':' .. ARGV[i])
    end
    out[#out + 1] = 1
  end
end
return out
