-- Leases a deployment's requests and tokens to one instance out of the one bucket every
-- instance shares (GCRA per dimension: one theoretical arrival time in microseconds of the
-- server's clock, a burst of `burst` units), and takes what answers and 429s reported.
-- KEYS[1] the deployment's hash (req_tat, tok_tat, pause)
-- ARGV: 1 rpm (0: none), 2 request burst, 3 requests wanted, 4 tpm (0: none), 5 token burst,
--       6 tokens wanted, 7 tokens the waiting call needs at least, 8 pause in µs (0: none),
--       9 requests the upstream says are left (-1: no report), 10 tokens left (-1),
--       11 requests and 12 tokens to leave in the bucket (for the first lane's calls)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local key = KEYS[1]
local function num(x) return string.format('%.0f', x) end
local minute = 60000000

local pause = tonumber(ARGV[8])
local paused = tonumber(redis.call('HGET', key, 'pause')) or 0
if pause > 0 and now + pause > paused then
  paused = now + pause
  redis.call('HSET', key, 'pause', num(paused))
end
redis.call('PEXPIRE', key, 3600000)

-- What one dimension can lease now: the theoretical arrival time after a report, how many
-- units may go (at most `want`), and the wait when fewer than `least` may.
local function look(field, rate, burst, want, least, left, keep)
  local step = minute / rate
  local tau = step * burst
  local tat = math.max(tonumber(redis.call('HGET', key, field)) or now, now)
  if left >= 0 then tat = math.max(tat, now + tau - left * step) end
  local avail = math.floor((now + tau - tat) / step) - keep
  if avail < least then
    return tat, 0, math.ceil(tat + (least + keep) * step - tau - now), step
  end
  return tat, math.min(want, avail), 0, step
end

local rpm, tpm = tonumber(ARGV[1]), tonumber(ARGV[4])
local rtat, rgot, rwait, rstep, ttat, tgot, twait, tstep
if rpm > 0 then
  rtat, rgot, rwait, rstep = look('req_tat', rpm, tonumber(ARGV[2]), tonumber(ARGV[3]), 1, tonumber(ARGV[9]), tonumber(ARGV[11]))
else
  rgot, rwait = tonumber(ARGV[3]), 0
end
if tpm > 0 then
  ttat, tgot, twait, tstep = look('tok_tat', tpm, tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[10]), tonumber(ARGV[12]))
else
  tgot, twait = tonumber(ARGV[6]), 0
end
local wait = math.max(rwait, twait, paused - now, 0)
if wait > 0 then
  -- Nothing is leased; reports still move the buckets on.
  if rtat then redis.call('HSET', key, 'req_tat', num(rtat)) end
  if ttat then redis.call('HSET', key, 'tok_tat', num(ttat)) end
  return {0, 0, wait}
end
if rtat then redis.call('HSET', key, 'req_tat', num(rtat + rgot * rstep)) end
if ttat then redis.call('HSET', key, 'tok_tat', num(ttat + tgot * tstep)) end
return {rgot, tgot, 0}
