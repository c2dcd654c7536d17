-- Settles a hold at what the call used; a hold already settled or charged is left alone, so a
-- settle sent twice counts once.
-- KEYS[1] the account hash, KEYS[2] the holds' deadlines
-- ARGV: 1 hold id, 2 tokens used, 3 cost, 4 tpm (0 none), 5 UTC day, 6 UTC month
local acct = KEYS[1]
local h = redis.call('HGET', acct, 'h:' .. ARGV[1])
if not h then return 0 end
local c, n = string.match(h, '^(%d+):(%d+)$')
redis.call('HDEL', acct, 'h:' .. ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HINCRBY', acct, 'reserved', '-' .. c)
redis.call('HINCRBY', acct, 'day_reserved', '-' .. n)
redis.call('HINCRBY', acct, 'spent', ARGV[3])
if redis.call('HGET', acct, 'day') ~= ARGV[5] then
  redis.call('HSET', acct, 'day', ARGV[5], 'day_tokens', 0)
end
if redis.call('HGET', acct, 'month') ~= ARGV[6] then
  redis.call('HSET', acct, 'month', ARGV[6], 'month_spent', 0)
end
redis.call('HINCRBY', acct, 'day_tokens', ARGV[2])
redis.call('HINCRBY', acct, 'month_spent', ARGV[3])
local tpm = tonumber(ARGV[4])
if tpm > 0 then
  -- The tokens quota is refunded or charged the difference from what was reserved.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local tat = tonumber(redis.call('HGET', acct, 'tpm_tat')) or now
  tat = tat + (60000000 / tpm) * (tonumber(ARGV[2]) - tonumber(n))
  redis.call('HSET', acct, 'tpm_tat', string.format('%.0f', math.max(tat, now)))
end
return 1
