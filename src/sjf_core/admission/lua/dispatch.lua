-- clairvoyant-sjf Redis admission store: the second part of the shared prelude, after
-- lib.lua (whose KEYS, ARGV and helpers it uses): waiter and lease bookkeeping, the grant,
-- the dispatch rule (due deadlines, promotion, priority, key, arrival) and the reply summary.

-- Remove a waiting ticket from every index. Returns true if it was waiting.
local function drop_waiter(id)
  local info = redis.call('HGET', K_WI, id)
  redis.call('ZREM', K_AGE, id)
  redis.call('ZREM', K_ALIVE, id)
  if not info then return false end
  local f = split(info)
  redis.call('ZREM', K_DL .. ':' .. f[1], id)
  redis.call('ZREM', K_BD .. ':' .. f[1], id)
  redis.call('ZREM', K_VB .. ':' .. f[1], id)
  redis.call('ZREM', K_AGE .. ':' .. f[1], id)
  local qk = P .. ':q:' .. f[1]
  if f[10] then
    local tk = tq(f[1], f[10])
    redis.call('ZREM', tk, id)
    if redis.call('ZCARD', tk) == 0 then redis.call('ZREM', tnk(f[1]), f[10]) end
  else
    redis.call('ZREM', qk, id)
  end
  if redis.call('ZCARD', qk) == 0 and redis.call('ZCARD', tnk(f[1])) == 0 then redis.call('ZREM', K_LV, f[1]) end
  redis.call('HDEL', K_WI, id)
  if FCFSB and f[6] then
    local w = stnum('wwork') - tonumber(f[6])
    if w < 0 or redis.call('HLEN', K_WI) == 0 then w = 0 end
    redis.call('HSET', K_ST, 'wwork', num(w))
  end
  if f[8] then
    local w = stnum('wtok') - tonumber(f[8])
    if w < 0 or redis.call('HLEN', K_WI) == 0 then w = 0 end
    redis.call('HSET', K_ST, 'wtok', num(w))
    -- a waiter of the current batch (arrived at the current served work) leaves it
    if f[9] == (redis.call('HGET', K_ST, 'vw') or '0') then
      local b = stnum('wbatch') - tonumber(f[8])
      if b < 0 or w == 0 then b = 0 end
      redis.call('HSET', K_ST, 'wbatch', num(b))
    end
  end
  return true
end

-- A tenant's weighted service seconds moved by dt (seconds of work / weight): store it and
-- re-score the tenant at every level where it waits.
local function charge(tenant, dt)
  local v = tonumber(redis.call('HGET', K_VT, tenant) or '0') + dt
  redis.call('HSET', K_VT, tenant, num(v))
  for _, lvl in ipairs(redis.call('ZRANGE', K_LV, 0, -1)) do
    redis.call('ZADD', tnk(lvl), 'XX', num(v), tenant)
  end
end

-- Remove a lease. Returns its "id klass dispatched_at work owner [tenant weight]" fields,
-- or nil if not held.
local function drop_lease(fence)
  if redis.call('ZREM', K_LEASES, fence) == 0 then return nil end
  local info = redis.call('HGET', K_LI, fence)
  redis.call('HDEL', K_LI, fence)
  if not info then return {} end
  local f = split(info)
  if redis.call('HGET', K_HELD, f[1]) == fence then redis.call('HDEL', K_HELD, f[1]) end
  return f
end

-- Remove waiters whose owner stopped heart-beating and leases that expired (holder died).
local function reap()
  local dead = redis.call('ZRANGEBYSCORE', K_ALIVE, '-inf', fmt(NOW), 'LIMIT', 0, 256)
  for _, id in ipairs(dead) do
    drop_waiter(id)
    redis.call('DEL', P .. ':w:' .. id)
    redis.call('HINCRBY', K_ST, 'expired_waiters', 1)
  end
  local gone = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', fmt(NOW), 'LIMIT', 0, 256)
  for _, fence in ipairs(gone) do
    drop_lease(fence)
    redis.call('HINCRBY', K_ST, 'expired_leases', 1)
  end
end

-- Estimated unfinished work per slot at time t (s): expected service of the waiters plus
-- the expected remainder of the running leases (HeapPending.backlog_s, "fcfs-bound").
local function backlog(t)
  local running = 0
  for _, info in ipairs(redis.call('HVALS', K_LI)) do
    local f = split(info)
    if f[4] then
      local left = tonumber(f[4]) - (t - tonumber(f[3]))
      if left > 0 then running = running + left end
    end
  end
  return (stnum('wwork') + running) / SLOTS
end

-- Give a slot to a waiting ticket: lease + wake-up signal. Returns false if it was not waiting.
-- Until its process picks the grant up and renews it, the lease lives no longer than the
-- waiter's own liveness: a waiter that died while queued costs no extra lease TTL.
local function grant(id, promoted)
  local raw = redis.call('HGET', K_WI, id)
  local alive = tonumber(redis.call('ZSCORE', K_ALIVE, id) or '')
  if not drop_waiter(id) then return false end
  local info = split(raw)
  local fence = int(redis.call('INCR', K_FENCE))
  local expiry = NOW + LEASE_TTL
  if alive and alive < expiry then expiry = alive end
  redis.call('ZADD', K_LEASES, fmt(expiry), fence)
  local li = id .. ' ' .. info[2] .. ' ' .. fmt(NOW) .. ' ' .. (info[6] or '0') .. ' ' .. (info[7] or '?')
  if info[10] then
    -- fair shares: charge the tenant its expected work; the system virtual time moves to
    -- where it stood before this charge
    local w = tonumber(info[11]) or 1
    local v = tonumber(redis.call('HGET', K_VT, info[10]) or '0')
    if v > stnum('vclock') then redis.call('HSET', K_ST, 'vclock', num(v)) end
    charge(info[10], (tonumber(info[6]) or 0) / w)
    li = li .. ' ' .. info[10] .. ' ' .. (info[11] or '1')
  end
  redis.call('HSET', K_LI, fence, li)
  redis.call('HSET', K_HELD, id, fence)
  local wk = P .. ':w:' .. id
  -- the signal: fence, dispatch time, promoted, slots in use, expected work (s)
  redis.call('RPUSH', wk, fence .. ' ' .. fmt(NOW) .. ' ' .. (promoted and '1' or '0') .. ' '
    .. tostring(redis.call('ZCARD', K_LEASES)) .. ' ' .. (info[6] or '0'))
  redis.call('PEXPIRE', wk, math.floor(2000 * (WAITER_TTL + LEASE_TTL)))
  redis.call('HINCRBY', K_ST, 'dispatched', 1)
  -- the served-work clock (HeapPending.served_work) advances by the work of every dispatch
  if info[8] then
    redis.call('HSET', K_ST, 'vw', num(stnum('vw') + tonumber(info[8])), 'wbatch', '0')
  end
  if promoted then redis.call('HINCRBY', K_ST, 'promoted', 1) end
  return true
end

-- The waiter due first, if any (PendingBase.pop: deadline, then the strategy's due()): a deadline whose latest start
-- time has come, else ("fcfs-bound") the earliest FCFS bound that has come, once it has
-- also waited FLOOR × the mean backlog; else ("work-bound") the earliest due point on the
-- served-work clock that has come; all within priority level L (the top band). Returns id,
-- promoted.
local function due(L)
  if not L then return nil, false end
  local K_DL, K_BD, K_VB = K_DL .. ':' .. L, K_BD .. ':' .. L, K_VB .. ':' .. L
  local d = redis.call('ZRANGE', K_DL, 0, 0, 'WITHSCORES')
  if d[1] and tonumber(d[2]) <= NOW then return d[1], false end
  if FCFSB then
    local b = redis.call('ZRANGE', K_BD, 0, 0, 'WITHSCORES')
    if b[1] and tonumber(b[2]) <= NOW then
      local arr = redis.call('ZSCORE', K_AGE, b[1])
      if arr and NOW - tonumber(arr) >= FLOOR * stnum('mbl') then return b[1], true end
    end
  elseif MAXWAIT then
    local b = redis.call('ZRANGE', K_BD, 0, 0, 'WITHSCORES')
    if b[1] and tonumber(b[2]) <= NOW then return b[1], true end
  end
  if WORKB then
    local v = redis.call('ZRANGE', K_VB, 0, 0, 'WITHSCORES')
    if v[1] and tonumber(v[2]) <= stnum('vw') then return v[1], true end
  end
  return nil, false
end

-- Grant free slots to waiters (work-conserving), as HeapPending.pop, inside the top priority
-- band: a due waiter first; then ("strict" / "one-in-k") the oldest waiter older than τ, at most once per K
-- dispatches; otherwise the lowest (-priority, key, id), or with aging the lowest
-- age-weighted score.
local function dispatch()
  local granted = 0
  local tau = tau_s()
  while redis.call('ZCARD', K_LEASES) < SLOTS do
    local since = stnum('since')
    local top = redis.call('ZRANGE', K_LV, 0, 0)[1]
    local chosen, promoted = due(top)
    if not chosen and top and tau and THRESHOLD and since + 1 >= K then
      local o = redis.call('ZRANGE', K_AGE .. ':' .. top, 0, 0, 'WITHSCORES')
      if o[1] and NOW - tonumber(o[2]) > tau then
        chosen, promoted, since = o[1], true, 0
      end
    end
    local qk = nil
    if not chosen then
      local lv = redis.call('ZRANGE', K_LV, 0, 0)
      if not lv[1] then break end
      -- fair shares: the least-served tenant of the top level, then its own order
      local tenant = redis.call('ZRANGE', tnk(lv[1]), 0, 0)[1]
      qk = tenant and tq(lv[1], tenant) or (P .. ':q:' .. lv[1])
      chosen = redis.call('ZRANGE', qk, 0, 0)[1]
      if not chosen then
        if tenant then
          redis.call('ZREM', tnk(lv[1]), tenant)
        elseif redis.call('ZCARD', tnk(lv[1])) == 0 then
          redis.call('ZREM', K_LV, lv[1])
        end
      else
        since = since + 1
      end
    end
    if chosen then
      if grant(chosen, promoted) then
        redis.call('HSET', K_ST, 'since', int(since))
        granted = granted + 1
      elseif qk then
        redis.call('ZREM', qk, chosen) -- an index entry without its ticket: drop it
      end
    end
  end
  return granted
end

-- Aging (promotion.Aging.order_key): score = key + SPAN × (arrival - origin) / (HORIZON × τ),
-- within the priority level (strict bands). The frame (origin, aging seconds) is re-anchored when the queue is empty,
-- and all scores are rebuilt when τ drifted by more than 10% (rare, O(n log n)).
local function aging_frame(arrival)
  local target = HORIZON * tau_s()
  local origin = tonumber(redis.call('HGET', K_ST, 'ag_origin') or '')
  local ag = tonumber(redis.call('HGET', K_ST, 'ag_s') or '')
  if redis.call('ZCARD', K_AGE) == 0 or not origin or not ag then
    origin, ag = arrival, target
    redis.call('HSET', K_ST, 'ag_origin', fmt(origin), 'ag_s', num(ag))
  elseif math.abs(target - ag) / ag > 0.10 then
    local o = redis.call('ZRANGE', K_AGE, 0, 0, 'WITHSCORES')
    origin = arrival
    if o[1] and tonumber(o[2]) < origin then origin = tonumber(o[2]) end
    ag = target
    redis.call('HSET', K_ST, 'ag_origin', fmt(origin), 'ag_s', num(ag))
    for _, lvl in ipairs(redis.call('ZRANGE', K_LV, 0, -1)) do
      local qks = {P .. ':q:' .. lvl}
      for _, t in ipairs(redis.call('ZRANGE', tnk(lvl), 0, -1)) do qks[#qks + 1] = tq(lvl, t) end
      for _, qk in ipairs(qks) do
        for _, id in ipairs(redis.call('ZRANGE', qk, 0, -1)) do
          local f = split(redis.call('HGET', K_WI, id) or '')
          if f[5] then
            local sc = tonumber(f[4]) + SPAN * ((tonumber(f[5]) - origin) / ag)
            redis.call('ZADD', qk, num(sc), id)
          end
        end
      end
    end
    redis.call('HINCRBY', K_ST, 'aging_rebuilds', 1)
  end
  return origin, ag
end

-- Seconds until the earliest lease expiry ("" when no lease is held).
local function next_expiry()
  local o = redis.call('ZRANGE', K_LEASES, 0, 0, 'WITHSCORES')
  if o[1] then return fmt(tonumber(o[2]) - NOW) end
  return ''
end

local function summary()
  local tau = tau_s()
  return {
    tostring(redis.call('ZCARD', K_LEASES)),
    tostring(redis.call('ZCARD', K_AGE)),
    tau and fmt(tau) or 'inf',
    next_expiry(),
  }
end

local function append(out, items)
  for _, v in ipairs(items) do out[#out + 1] = v end
  return out
end
