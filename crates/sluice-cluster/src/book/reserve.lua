-- Reserves a call for a tenant, atomically: credits, spend per month, tokens per day, and
-- requests and tokens per minute (GCRA, one theoretical arrival time each, in microseconds
-- of the server's clock). Holds past their deadline (their instance died) are charged in
-- full first: what may have been spent is never given back.
-- KEYS[1] the account hash, KEYS[2] the holds' deadlines (a sorted set)
-- ARGV: 1 hold id, 2 tokens, 3 cost, 4 credits (-1 none), 5 rpm (0 none), 6 tpm (0 none),
--       7 tokens per day (-1), 8 spend per month (-1), 9 UTC day, 10 UTC month, 11 hold ttl ms
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local acct = KEYS[1]
local function num(x) return string.format('%.0f', x) end

local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 64)
for _, id in ipairs(dead) do
  local h = redis.call('HGET', acct, 'h:' .. id)
  if h then
    local c, n = string.match(h, '^(%d+):(%d+)$')
    redis.call('HINCRBY', acct, 'reserved', '-' .. c)
    redis.call('HINCRBY', acct, 'day_reserved', '-' .. n)
    redis.call('HINCRBY', acct, 'spent', c)
    redis.call('HINCRBY', acct, 'month_spent', c)
    redis.call('HINCRBY', acct, 'reaped', 1)
    redis.call('HDEL', acct, 'h:' .. id)
  end
  redis.call('ZREM', KEYS[2], id)
end

local f = redis.call('HMGET', acct, 'spent', 'reserved', 'day', 'day_tokens', 'day_reserved',
  'month', 'month_spent', 'rpm_tat', 'tpm_tat')
local spent = tonumber(f[1]) or 0
local reserved = tonumber(f[2]) or 0
local day_tokens = tonumber(f[4]) or 0
local day_reserved = tonumber(f[5]) or 0
local month_spent = tonumber(f[7]) or 0
if f[3] ~= ARGV[9] then
  day_tokens = 0
  redis.call('HSET', acct, 'day', ARGV[9], 'day_tokens', 0)
end
if f[6] ~= ARGV[10] then
  month_spent = 0
  redis.call('HSET', acct, 'month', ARGV[10], 'month_spent', 0)
end

local tokens = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local credits = tonumber(ARGV[4])
local rpm = tonumber(ARGV[5])
local tpm = tonumber(ARGV[6])
local per_day = tonumber(ARGV[7])
local per_month = tonumber(ARGV[8])

if per_day >= 0 and day_tokens + day_reserved + tokens > per_day then
  return {2, 2, per_day, math.max(per_day - day_tokens - day_reserved, 0), -1}
end
if per_month >= 0 and month_spent + reserved + cost > per_month then
  return {2, 3, per_month, math.max(per_month - month_spent - reserved, 0), -1}
end
if credits >= 0 and spent + reserved + cost > credits then
  return {1, spent, reserved, 0, 0}
end

-- GCRA with a minute's worth of burst: the call may go when its arrival time, moved on by
-- its cost, is within a minute of now.
local minute = 60000000
local function gcra(tat_field, rate, n)
  local step = minute / rate
  local tat = math.max(tonumber(f[tat_field]) or now, now)
  local next_tat = tat + step * n
  local remaining = math.floor((now + minute - tat) / step)
  if next_tat - minute > now then
    return nil, math.max(remaining, 0), math.ceil((next_tat - minute - now) / 1000)
  end
  return tat, remaining, 0
end
local rpm_tat, tpm_tat
if rpm > 0 then
  local tat, remaining, wait = gcra(8, rpm, 1)
  if not tat then return {2, 0, rpm, remaining, wait} end
  rpm_tat = tat + minute / rpm
end
if tpm > 0 then
  -- A call larger than a minute's quota waits for a full minute, then goes.
  local tat, remaining, wait = gcra(9, tpm, math.min(tokens, tpm))
  if not tat then return {2, 1, tpm, remaining, wait} end
  tpm_tat = tat + (minute / tpm) * tokens
end
if rpm_tat then redis.call('HSET', acct, 'rpm_tat', num(rpm_tat)) end
if tpm_tat then redis.call('HSET', acct, 'tpm_tat', num(tpm_tat)) end

redis.call('HINCRBY', acct, 'reserved', cost)
redis.call('HINCRBY', acct, 'day_reserved', tokens)
redis.call('HSET', acct, 'h:' .. ARGV[1], num(cost) .. ':' .. num(tokens))
redis.call('ZADD', KEYS[2], num(now + tonumber(ARGV[11]) * 1000), ARGV[1])
local left = -1
if credits >= 0 then left = credits - spent - reserved - cost end
return {0, left, 0, 0, 0}
