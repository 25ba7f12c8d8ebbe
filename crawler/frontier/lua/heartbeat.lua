-- Renew this worker's lease. KEYS workers; ARGV me, lease ms.
redis.call('ZADD', KEYS[1], now_ms() + tonumber(ARGV[2]), ARGV[1])
