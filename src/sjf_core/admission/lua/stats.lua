-- stats: reap and dispatch, then report. Returns {in_flight, waiting, tau, next_expiry,
-- epoch, mean_short_service_s, field, value, field, value, ...} (the counters of K_ST).
local e = epoch()
reap()
dispatch()
local out = summary()
out[#out + 1] = e
out[#out + 1] = redis.call('HGET', K_ST, 'mean') or fmt(TAU_INIT)
return append(out, redis.call('HGETALL', K_ST))
