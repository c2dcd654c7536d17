-- Adds spend that happened without a hold: what an instance spent of its local share while
-- Redis could not answer, or (once per account, on a cold start) what the ledger says was
-- spent before. ARGV[5] = 1 asks for the latter: it is added only if the account was never
-- restored.
-- KEYS[1] the account hash
-- ARGV: 1 tokens, 2 cost, 3 UTC day, 4 UTC month, 5 restore (1) or spend (0), 6 month spend,
--       7 tokens today
local acct = KEYS[1]
if ARGV[5] == '1' then
  if redis.call('HSETNX', acct, 'restored', 1) == 0 then return 0 end
  redis.call('HINCRBY', acct, 'spent', ARGV[2])
  if redis.call('HGET', acct, 'month') ~= ARGV[4] then
    redis.call('HSET', acct, 'month', ARGV[4], 'month_spent', 0)
  end
  if redis.call('HGET', acct, 'day') ~= ARGV[3] then
    redis.call('HSET', acct, 'day', ARGV[3], 'day_tokens', 0)
  end
  redis.call('HINCRBY', acct, 'month_spent', ARGV[6])
  redis.call('HINCRBY', acct, 'day_tokens', ARGV[7])
  return 1
end
redis.call('HINCRBY', acct, 'spent', ARGV[2])
if redis.call('HGET', acct, 'month') == ARGV[4] then
  redis.call('HINCRBY', acct, 'month_spent', ARGV[2])
end
if redis.call('HGET', acct, 'day') == ARGV[3] then
  redis.call('HINCRBY', acct, 'day_tokens', ARGV[1])
end
return 1
