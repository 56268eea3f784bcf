-- heartbeat: keeps this process's waiters alive and renews its leases, then reaps the
-- dead and dispatches. ARGV[A] = number of waiters W, then W ticket ids; then the number
-- of held leases H, then H groups of (fence, epoch, id, klass, dispatched_at, work, owner).
-- A lease missing in the same epoch expired (reply "lost"); missing because Redis lost its
-- data (new epoch) it is re-asserted ("re"), so the slot bound holds again at once.
-- A waiter that is no longer known (reaped, or data lost) is told so through its wake
-- list ("gone"), so it re-enqueues at once.
-- Returns {in_flight, waiting, tau, next_expiry, epoch, W statuses..., H statuses...}.
local e = epoch()
local i = A
local nw = tonumber(ARGV[i]); i = i + 1
local ws = {}
for j = 1, nw do
  local id = ARGV[i]; i = i + 1
  if redis.call('HEXISTS', K_WI, id) == 1 then
    redis.call('ZADD', K_ALIVE, 'XX', fmt(NOW + WAITER_TTL), id)
    ws[j] = 'q'
  elseif redis.call('HEXISTS', K_HELD, id) == 1 then
    -- granted, not yet picked up: keep the lease alive for its live waiter
    redis.call('ZADD', K_LEASES, 'XX', fmt(NOW + LEASE_TTL), redis.call('HGET', K_HELD, id))
    ws[j] = 'g'
  elseif redis.call('SISMEMBER', P .. ':sup', id) == 1 then
    ws[j] = 'superseded'  -- replaced by a newer request with its supersede key
  else
    local wk = P .. ':w:' .. id
    redis.call('DEL', wk)
    redis.call('RPUSH', wk, 'gone')
    redis.call('PEXPIRE', wk, math.floor(2000 * WAITER_TTL))
    ws[j] = 'gone'
  end
end
local nh = tonumber(ARGV[i]); i = i + 1
local hs = {}
for j = 1, nh do
  local fence, ep, id, klass, disp, work, owner = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4],
    ARGV[i + 5], ARGV[i + 6]
  i = i + 7
  if redis.call('ZSCORE', K_LEASES, fence) then
    redis.call('ZADD', K_LEASES, 'XX', fmt(NOW + LEASE_TTL), fence)
    hs[j] = 'ok'
  elseif ep ~= e then
    redis.call('ZADD', K_LEASES, fmt(NOW + LEASE_TTL), fence)
    redis.call('HSET', K_LI, fence, id .. ' ' .. klass .. ' ' .. disp .. ' ' .. work .. ' ' .. owner)
    redis.call('HSET', K_HELD, id, fence)
    redis.call('HINCRBY', K_ST, 'reasserted', 1)
    hs[j] = 're'
  else
    hs[j] = 'lost'
  end
end
reap()
dispatch()
local out = summary()
out[#out + 1] = e
append(out, ws)
return append(out, hs)
