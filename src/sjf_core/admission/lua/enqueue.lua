-- enqueue: ARGV[A] policy key, ARGV[A+1] priority (integer), ARGV[A+2] predicted class
-- (0/1/2), ARGV[A+3] age at enqueue (s; > 0 for a retry that keeps its arrival),
-- ARGV[A+4] deadline relative to now (s) or "", ARGV[A+5] predicted answer tokens (for the
-- expected service time, from the shared service statistics), ARGV[A+6] owner
-- ("<pid>@<host>", no spaces: shown by snapshot, for operators and tests), ARGV[A+7] tenant
-- id (no spaces; "" for none: one shared order), ARGV[A+8] the tenant's weight (> 0),
-- ARGV[A+9] supersede key ("" none): the waiting ticket of the same tenant with this key
-- leaves the queue and is told "superseded" (its id joins <P>:sup, so that a heartbeat does
-- not take it for a lost waiter); a granted one is never touched.
-- Returns {id, epoch, arrival, grant or "", in_flight, waiting, tau, next_expiry}.
local e = epoch()
local id = string.format('%017.0f', redis.call('INCR', K_SEQ))
local key, prio, klass, owner = ARGV[A], ARGV[A + 1], ARGV[A + 2], ARGV[A + 6]
local work = num(expected_s(tonumber(klass), tonumber(ARGV[A + 5])))
local arrival = NOW - tonumber(ARGV[A + 3])
local level, score = prio, key
local tau = tau_s()
-- work of this request on the served-work clock (promotion.work_tokens)
local wt = math.max(tonumber(ARGV[A + 5]) or 0, 0) + OVERHEAD
if WORKA then
  -- promotion.WorkAging.order_key: key + span / (TOKEN_SPAN × slowdown) × served work
  score = num(tonumber(key) + SPAN / TOKEN_SPAN / SLOWDOWN * stnum('vw'))
end
if WORKB then
  -- promotion.WorkBound.bound: served + max(slowdown × own work, (1 + slack) × work ahead),
  -- the work ahead counting only waiters that arrived before the last dispatch
  local ahead = math.max(stnum('wtok') - stnum('wbatch'), 0)
  local vb = stnum('vw') + math.max(SLOWDOWN * wt, (1 + WSLACK) * ahead)
  redis.call('ZADD', K_VB .. ':' .. level, num(vb), id)
end
redis.call('HSET', K_ST, 'wtok', num(stnum('wtok') + wt), 'wbatch', num(stnum('wbatch') + wt))
local w0 = redis.call('HGET', K_ST, 'vw') or '0' 
if AGING then
  local origin, ag = aging_frame(arrival)
  score = num(tonumber(key) + SPAN * ((arrival - origin) / ag))
end
if FCFSB then
  local bound = nil
  if tau then
    -- promotion.FCFSBound.bound: arrival + max(τ, (1 + slack) × backlog at arrival)
    local u = backlog(arrival)
    local mbl = stnum('mbl')
    redis.call('HSET', K_ST, 'mbl', num(mbl + 0.02 * (u - mbl)))
    bound = arrival + math.max(tau, (1 + SLACK) * u)
  end
  -- max_wait_s holds without a τ too, as in FCFSBound.on_push (min(bound, arrival + cap))
  if MAXWAIT then bound = math.min(bound or math.huge, arrival + MAXWAIT) end
  if bound then redis.call('ZADD', K_BD .. ':' .. level, fmt(bound), id) end
  redis.call('HSET', K_ST, 'wwork', num(stnum('wwork') + tonumber(work)))
elseif MAXWAIT then
  redis.call('ZADD', K_BD .. ':' .. level, fmt(arrival + MAXWAIT), id)
end
-- fair shares: ARGV[A+7] tenant ("" none), ARGV[A+8] its weight
local tenant = ARGV[A + 7]
if tenant == '' then tenant = nil end
local winfo = level .. ' ' .. klass .. ' ' .. prio .. ' ' .. key .. ' ' .. fmt(arrival) .. ' ' .. work .. ' ' .. owner .. ' ' .. num(wt) .. ' ' .. w0
local qk = P .. ':q:' .. level
if tenant then
  winfo = winfo .. ' ' .. tenant .. ' ' .. num(tonumber(ARGV[A + 8]) or 1)
  qk = tq(level, tenant)
  if redis.call('ZCARD', qk) == 0 then
    -- (re)joins this level: starts no earlier than the system virtual time
    local v = tonumber(redis.call('HGET', K_VT, tenant) or '0')
    local vc = stnum('vclock')
    if v < vc then
      v = vc
      redis.call('HSET', K_VT, tenant, num(v))
    end
    redis.call('ZADD', tnk(level), num(v), tenant)
  end
end
redis.call('HSET', K_WI, id, winfo)
redis.call('ZADD', qk, score, id)
redis.call('ZADD', K_LV, int(-tonumber(level)), level)
redis.call('ZADD', K_AGE, fmt(arrival), id)
if THRESHOLD then redis.call('ZADD', K_AGE .. ':' .. level, fmt(arrival), id) end
redis.call('ZADD', K_ALIVE, fmt(NOW + WAITER_TTL), id)
if ARGV[A + 4] ~= '' then
  -- latest start time: deadline minus expected service (EDF)
  redis.call('ZADD', K_DL .. ':' .. level, fmt(NOW + tonumber(ARGV[A + 4]) - tonumber(work)), id)
end
if ARGV[A + 9] and ARGV[A + 9] ~= '' then
  local ssk = P .. ':ss'
  local field = (tenant or '-') .. '|' .. ARGV[A + 9]
  local old = redis.call('HGET', ssk, field)
  if old and old ~= id and redis.call('HEXISTS', K_WI, old) == 1 then
    drop_waiter(old)
    redis.call('SADD', P .. ':sup', old)
    redis.call('PEXPIRE', P .. ':sup', math.floor(4000 * (WAITER_TTL + LEASE_TTL)))
    local owk = P .. ':w:' .. old
    redis.call('DEL', owk)
    redis.call('RPUSH', owk, 'superseded')
    redis.call('PEXPIRE', owk, math.floor(2000 * (WAITER_TTL + LEASE_TTL)))
    redis.call('HINCRBY', K_ST, 'superseded', 1)
  end
  redis.call('HSET', ssk, field, id)
  redis.call('PEXPIRE', ssk, 86400000)
end
redis.call('HINCRBY', K_ST, 'enqueued', 1)
reap()
dispatch()
local g = ''
if redis.call('HEXISTS', K_HELD, id) == 1 then
  local wk = P .. ':w:' .. id
  g = redis.call('LPOP', wk) or ''
  redis.call('DEL', wk)
end
return append({id, e, fmt(arrival), g}, summary())
