-- cancel: ARGV[A] ticket id. A waiter that went away leaves the queue; if it was granted
-- meanwhile (the wake-up crossed the cancellation), its lease is freed and passed on.
-- Returns {"removed" | "released" | "none", in_flight, waiting, tau, next_expiry}.
epoch()
local id = ARGV[A]
local res = 'none'
if drop_waiter(id) then
  res = 'removed'
  redis.call('HINCRBY', K_ST, 'cancelled', 1)
else
  local fence = redis.call('HGET', K_HELD, id)
  if fence and drop_lease(fence) then
    res = 'released'
    redis.call('HINCRBY', K_ST, 'released', 1)
  end
end
-- unblock a BLPOP the cancelled waiter may have left behind (it ignores what it pops)
local wk = P .. ':w:' .. id
redis.call('DEL', wk)
redis.call('RPUSH', wk, 'bye')
redis.call('PEXPIRE', wk, 2000)
reap()
dispatch()
return append({res}, summary())
