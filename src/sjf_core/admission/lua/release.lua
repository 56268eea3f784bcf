-- release: ARGV[A] fence, ARGV[A+1] true class of the answer (0/1/2) or -1 (unknown: use
-- the predicted class), ARGV[A+2] answer tokens (or -1). Only the holder of this fence can free this lease: a stale holder
-- (lease expired and maybe granted again under a new fence) frees nothing.
-- Updates the mean Short service time (EWMA on server time) that τ is derived from, and
-- the shared service statistics (per predicted class, seconds per token).
-- Returns {"1" | "0", service_s or "", in_flight, waiting, tau, next_expiry}.
epoch()
local f = drop_lease(ARGV[A])
local out = {'0', ''}
if f then
  out[1] = '1'
  redis.call('HINCRBY', K_ST, 'released', 1)
  if f[3] then
    local s = NOW - tonumber(f[3])
    out[2] = fmt(s)
    if f[6] and f[4] and s >= 0 then
      -- fair shares: replace the tenant's expected charge by the measured service time
      charge(f[6], (s - tonumber(f[4])) / (tonumber(f[7]) or 1))
    end
    observe_service(tonumber(f[2]), s, tonumber(ARGV[A + 2]))
    local cls = tonumber(ARGV[A + 1])
    if cls < 0 then cls = tonumber(f[2]) end
    if cls == 0 and s >= 0 then
      local m = tonumber(redis.call('HGET', K_ST, 'mean') or TAU_INIT)
      redis.call('HSET', K_ST, 'mean', fmt(m + ALPHA * (s - m)))
      redis.call('HINCRBY', K_ST, 'completed_short', 1)
    end
  end
end
reap()
dispatch()
return append(out, summary())
