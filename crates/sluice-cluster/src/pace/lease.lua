-- Leases a deployment's requests and tokens to one instance out of the one bucket every
-- instance shares (GCRA per dimension: one theoretical arrival time in microseconds of the
-- server's clock, a burst of a share of one second's worth), takes what answers and 429s
-- reported, and keeps the request rate the cluster learnt from bare 429s.
--
-- Learning (for an upstream that announces no limit): a 429 that comes at least `hold` after
-- the last cut starts a new cut (its `epoch`); every instance then tells its share, the rate
-- its own sends say the upstream takes (as one instance alone measures it, headroom
-- included), and for `hold` the learnt rate is the sum of the shares told. After that, while
-- the learnt pace is what empties the bucket, the rate grows by `growth` a second.
--
-- A 429 reported empties the request bucket as of the report (the upstream's was empty).
--
-- KEYS[1] the deployment's hash (req_tat, tok_tat, pause, announced, epoch, cut, learnt,
--         grown, emptied, and `s:<instance>` for each share of the current cut)
-- ARGV: 1 rpm bound (configured or announced; 0: none), 2 lease share (of a second's rate),
--       3 tpm (0: none), 4 tokens the waiting call needs, 5 pause in µs (0: none),
--       6 requests the upstream says are left (-1: no report), 7 tokens left (-1),
--       8 1 when the asking call is of a later lane (leave some for the first lane),
--       9 429s met since the last lease, 10 1 when the upstream announced its request limit,
--       11 this instance's share in requests a second (-1: none), 12 the cut it is of
--       (-1: the current one), 13 the instance, 14 burst share, 15 share kept for the first
--       lane, 16 growth a second, 17 hold in µs, 18 span of growth in µs
--       19 half-life of the grants that decide turns, in µs, 20 calls waiting at the
--       instance (its weight in the turns)
-- Returns {requests leased, tokens leased, wait in µs, requests a minute paced at, epoch}.
--
-- Turns (fields `fw:<instance>`, until when it waits, `fn:<instance>`, the calls waiting at
-- it, and `fg:`/`ft:<instance>`, its grants decayed to a time): while the request bucket
-- holds no more units than other instances wait for, one that was granted more of late, for
-- the calls waiting at it, than a waiting one (by a unit or more) is told to wait one unit's
-- time. So instances sharing a limit are served in proportion to what waits at each, as one
-- gateway taking all their calls would, whatever the moment each asks at. Nothing is lost to
-- a turn: an ungranted unit stays in the bucket for the next asker. A lease for a call of
-- the first lane never waits a turn (interactive calls go before any instance's batch).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local key = KEYS[1]
local function num(x) return string.format('%.0f', x) end
local minute = 60000000
local A = ARGV
local bound, lease_share, tpm = tonumber(A[1]), tonumber(A[2]), tonumber(A[3])
local burst_share, keep_share = tonumber(A[14]), tonumber(A[15])
local growth, hold, span = tonumber(A[16]), tonumber(A[17]), tonumber(A[18])
local later = A[8] == '1'

local pause = tonumber(A[5])
local paused = tonumber(redis.call('HGET', key, 'pause')) or 0
if pause > 0 and now + pause > paused then
  paused = now + pause
  redis.call('HSET', key, 'pause', num(paused))
end
redis.call('PEXPIRE', key, 3600000)

-- What the cluster learnt of a limit no answer announces.
if A[10] == '1' then redis.call('HSET', key, 'announced', '1') end
local announced = redis.call('HGET', key, 'announced') == '1'
local epoch = tonumber(redis.call('HGET', key, 'epoch')) or 0
local cut = tonumber(redis.call('HGET', key, 'cut')) or 0
local learnt = tonumber(redis.call('HGET', key, 'learnt'))
if announced then
  learnt = nil
else
  if tonumber(A[9]) > 0 and now - cut >= hold then
    epoch = epoch + 1
    cut = now
    for _, f in ipairs(redis.call('HKEYS', key)) do
      if string.sub(f, 1, 2) == 's:' then redis.call('HDEL', key, f) end
    end
    redis.call('HSET', key, 'epoch', epoch, 'cut', num(cut), 'grown', num(now))
  end
  local share, of = tonumber(A[11]), tonumber(A[12])
  if of < 0 then of = epoch end
  if share > 0 and of == epoch and epoch > 0 and now - cut < hold then
    redis.call('HSET', key, 's:' .. A[13], tostring(share))
    local sum = 0
    local all = redis.call('HGETALL', key)
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 2) == 's:' then sum = sum + tonumber(all[i + 1]) end
    end
    learnt = sum
    redis.call('HSET', key, 'learnt', tostring(learnt))
  end
end

-- A 429 says the upstream's own bucket is empty: the shared one is emptied with it, and
-- refills from now at the rate paced (it would otherwise hand out a full burst at once).
if tonumber(A[9]) > 0 then redis.call('HSET', key, 'emptied', num(now)) end
local emptied = tonumber(redis.call('HGET', key, 'emptied'))

local rpm = bound
local by_learnt = false
if learnt and learnt > 0 and (rpm == 0 or learnt * 60 < rpm) then
  rpm = learnt * 60
  by_learnt = true
end

local function burst_of(rate)
  return math.max(1, math.floor(math.ceil(rate / 60) * burst_share))
end

-- What one dimension can lease now: the theoretical arrival time after a report, how many
-- units may go (at most `want`), the wait when fewer than `least` may, and how many could.
-- `empty_at`, when given, is when the bucket was last known empty.
local function look(field, rate, want, least, left, empty_at)
  local step = minute / rate
  local burst = burst_of(rate)
  local keep = 0
  if later then keep = math.floor(burst * keep_share) end
  local tau = step * burst
  local tat = math.max(tonumber(redis.call('HGET', key, field)) or now, now)
  if left >= 0 then tat = math.max(tat, now + tau - left * step) end
  if empty_at then tat = math.max(tat, empty_at + tau) end
  local avail = math.floor((now + tau - tat) / step) - keep
  if avail < least then
    return tat, 0, math.ceil(tat + (least + keep) * step - tau - now), step, avail
  end
  return tat, math.min(want, avail), 0, step, avail
end

local rtat, rgot, rwait, rstep, ravail, ttat, tgot, twait, tstep
local rwant = math.max(1, math.ceil(rpm / 60 * lease_share))
if rpm > 0 then
  rtat, rgot, rwait, rstep, ravail = look('req_tat', rpm, rwant, 1, tonumber(A[6]), emptied)
  if by_learnt and now - cut >= hold then
    -- The learnt pace holds calls back when this lease empties the bucket: it grows.
    if ravail <= rwant then
      local last = tonumber(redis.call('HGET', key, 'grown')) or now
      learnt = learnt * (1 + growth * math.min(now - last, span) / 1000000)
      redis.call('HSET', key, 'learnt', tostring(learnt))
    end
    redis.call('HSET', key, 'grown', num(now))
  end
else
  rgot, rwait = rwant, 0
end
local inst = A[13]
local half_life = tonumber(A[19])
local function granted(i)
  local g = tonumber(redis.call('HGET', key, 'fg:' .. i)) or 0
  local at = tonumber(redis.call('HGET', key, 'ft:' .. i)) or now
  return g * math.pow(0.5, math.max(now - at, 0) / half_life)
end
local function weight(i)
  return math.max(1, tonumber(redis.call('HGET', key, 'fn:' .. i)) or 1)
end
if rpm > 0 then redis.call('HSET', key, 'fn:' .. inst, A[20]) end
if rpm > 0 and rgot > 0 and later then
  local mine = granted(inst) / weight(inst)
  local waiting, owed = 0, false
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 3) == 'fw:' then
      local other = string.sub(f, 4)
      if tonumber(all[i + 1]) < now then
        redis.call('HDEL', key, f, 'fn:' .. other)
      elseif other ~= inst then
        waiting = waiting + 1
        if (granted(other) + 1) / weight(other) <= mine then owed = true end
      end
    elseif string.sub(f, 1, 3) == 'ft:' and now - tonumber(all[i + 1]) > 10 * half_life then
      -- An instance granted nothing for ten half-lives (gone, or idle) is forgotten.
      local other = string.sub(f, 4)
      redis.call('HDEL', key, f, 'fg:' .. other, 'fn:' .. other)
    end
  end
  if owed and ravail <= waiting then
    rgot, rwait = 0, math.ceil(rstep)
  end
end
local needs = tonumber(A[4])
if tpm > 0 then
  local want = math.max(math.ceil(tpm / 60 * lease_share), needs)
  ttat, tgot, twait, tstep = look('tok_tat', tpm, want, math.min(needs, burst_of(tpm)), tonumber(A[7]))
else
  tgot, twait = needs, 0
end
local paced = 0
if rpm > 0 then paced = math.max(1, math.floor(rpm)) end
local wait = math.max(rwait, twait, paused - now, 0)
if wait > 0 then
  -- Nothing is leased; reports still move the buckets on.
  if rtat then redis.call('HSET', key, 'req_tat', num(rtat)) end
  if ttat then redis.call('HSET', key, 'tok_tat', num(ttat)) end
  if rpm > 0 then redis.call('HSET', key, 'fw:' .. inst, num(now + wait + 2 * rstep)) end
  return {0, 0, wait, paced, epoch}
end
if rpm > 0 then
  redis.call('HDEL', key, 'fw:' .. inst)
  redis.call('HSET', key, 'fg:' .. inst, tostring(granted(inst) + rgot), 'ft:' .. inst, num(now))
end
if rtat then redis.call('HSET', key, 'req_tat', num(rtat + rgot * rstep)) end
if ttat then redis.call('HSET', key, 'tok_tat', num(ttat + tgot * tstep)) end
return {rgot, tgot, 0, paced, epoch}
