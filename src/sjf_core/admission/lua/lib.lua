-- clairvoyant-sjf Redis admission store: shared prelude of every script.
-- The Python side (sjf_core.admission._redis_wire) prepends this file, then dispatch.lua, to
-- each script body. The
-- dispatch rule mirrors sjf_core.policy._pending.HeapPending with the promotion strategies of
-- sjf_core.policy.promotion (same order, same parameters: strategy.wire()).
--
-- KEYS (all share the hash tag {sjf:<backend>}, so one backend lives in one Cluster slot):
--   1 seq     counter: ticket ids (arrival sequence, the FCFS tie-break)
--   2 fence   counter: fencing tokens of granted leases
--   3 lv      ZSET priority levels with waiters (score -priority, member priority)
--   4 age     ZSET waiting ticket ids by server arrival time (s): the τ index
--   5 alive   ZSET waiting ticket ids by liveness expiry (server s): dead-waiter cleanup
--   6 wi      HASH waiting ticket id -> "level klass priority key arrival work owner"
--   7 held    HASH granted ticket id -> fence
--   8 leases  ZSET fence -> lease expiry (server s); ZCARD = slots in use
--   9 li      HASH fence -> "id klass dispatched_at work owner"
--  10 st      HASH τ state (mean = mean Short service time, s; since = dispatches since
--             the last promotion; aging frame; fcfs-bound waiting work and mean
--             backlog), service statistics (sp0..sp2 = mean service s per predicted
--             class, spt = s per answer token) and counters
--  11 epoch   string: server time (µs) when this state was created; changes when Redis
--             lost its data (restart without persistence)
--  12 dl      prefix of the ZSETs <dl>:<level>: waiting ids of one priority band with a
--             deadline, by latest start time (server s)
--  13 bd      prefix of <bd>:<level>: waiting ids by FCFS bound or max-wait bound (server s)
--  14 vb      prefix of <vb>:<level>: waiting ids by due point on the served-work clock
--             (tokens), promotion "work-bound"; st.vw = served work (tokens), st.wtok =
--             waiting work, st.wbatch = waiting work that arrived since the last dispatch
-- Strict priority bands (sjf_core.policy._pending): every due index and the τ age index
-- (<age>:<level>, "strict" / "one-in-k") is kept per priority level, and only the top
-- level with waiters (the lowest score of lv) is looked at, so a due waiter of a lower
-- band never goes before a higher band.
-- Dynamic keys, built from ARGV[1] = "{sjf:<backend>}": <P>:q:<level> (ZSET of waiting
-- ids scored by the policy key; equal scores order by id, i.e. arrival; one level per
-- priority) and
-- <P>:w:<id> (LIST: the wake-up signal of one waiter, pushed at grant).
--
-- ARGV[1..14]: prefix, slots, tau mode ("off" | "seconds" | "multiple"), tau value
-- (seconds or multiple), initial mean Short service time (s), EWMA alpha, promotion k
-- (1 = strict), waiter TTL (s), lease TTL (s), promotion ("strict" | "one-in-k" | "aging"
-- | "fcfs-bound" | "work-aging" | "work-bound"), key span, aging horizon (multiples of τ),
-- fcfs-bound slack, fcfs-bound floor, seeds of the mean service time of Short, Medium, Long
-- (s), service EWMA alpha, slowdown (work-aging / work-bound), work-bound slack, max wait (s,
-- or "" for none), tokens charged per request on top of its expected answer, tokens per key
-- span of token keys. Script-specific arguments start at ARGV[24].
--
-- Numbers are stored with string.format: redis.call would format Lua numbers with
-- %.14g, and a script returns Lua numbers truncated to integers.

local P = ARGV[1]
local K_SEQ, K_FENCE, K_LV, K_AGE, K_ALIVE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local K_WI, K_HELD, K_LEASES, K_LI, K_ST, K_EPOCH = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local K_DL, K_BD, K_VB = KEYS[12], KEYS[13], KEYS[14]
local SLOTS = tonumber(ARGV[2])
local TAU_MODE = ARGV[3]
local TAU_VAL = tonumber(ARGV[4])
local TAU_INIT = tonumber(ARGV[5])
local ALPHA = tonumber(ARGV[6])
local K = tonumber(ARGV[7])
local WAITER_TTL = tonumber(ARGV[8])
local LEASE_TTL = tonumber(ARGV[9])
local PROMOTION = ARGV[10]
local AGING = PROMOTION == 'aging' and TAU_MODE ~= 'off'
local FCFSB = PROMOTION == 'fcfs-bound'
local THRESHOLD = PROMOTION == 'strict' or PROMOTION == 'one-in-k'
local SPAN = tonumber(ARGV[11])
local HORIZON = tonumber(ARGV[12])
local SLACK = tonumber(ARGV[13])
local FLOOR = tonumber(ARGV[14])
local SEEDS = {ARGV[15], ARGV[16], ARGV[17]}
local SALPHA = tonumber(ARGV[18])
local SLOWDOWN = tonumber(ARGV[19])
local WSLACK = tonumber(ARGV[20])
local MAXWAIT = tonumber(ARGV[21])
local OVERHEAD = tonumber(ARGV[22])
local TOKEN_SPAN = tonumber(ARGV[23])
local WORKA = PROMOTION == 'work-aging' and TAU_MODE ~= 'off'
local WORKB = PROMOTION == 'work-bound' and TAU_MODE ~= 'off'
local A = 24

local _t = redis.call('TIME')
local NOW = tonumber(_t[1]) + tonumber(_t[2]) / 1000000

local function fmt(x) return string.format('%.6f', x) end

-- Fair shares across tenants (sjf_core.fair_share.TenantPending): a waiter with a tenant
-- lives in <P>:q:<level>:t:<tenant> instead of <P>:q:<level>; <P>:tn:<level> is a ZSET of
-- the tenants with waiters at that level scored by their weighted service seconds
-- (<P>:vt HASH tenant -> seconds / weight; charged the expected work at grant, corrected
-- to the measured service at release); st.vclock = the system virtual time (the count of
-- the last granted tenant before its charge), where a tenant that (re)joins starts.
local K_VT = P .. ':vt'
local function tq(level, tenant) return P .. ':q:' .. level .. ':t:' .. tenant end
local function tnk(level) return P .. ':tn:' .. level end
local function num(x) return string.format('%.17g', x) end
local function int(x) return string.format('%.0f', x) end

-- The state epoch; created (with counters seeded from server time, so ids and fences stay
-- monotonic across a restart that lost the data) on first use.
local function epoch()
  local e = redis.call('GET', K_EPOCH)
  if not e then
    e = int(tonumber(_t[1]) * 1000000 + tonumber(_t[2]))
    redis.call('SET', K_EPOCH, e)
    local seq = tonumber(redis.call('GET', K_SEQ) or '0')
    if seq < tonumber(e) then redis.call('SET', K_SEQ, e) end
    local fence = tonumber(redis.call('GET', K_FENCE) or '0')
    if fence < tonumber(e) then redis.call('SET', K_FENCE, e) end
  end
  return e
end

local function tau_s()
  if TAU_MODE == 'seconds' then return TAU_VAL end
  if TAU_MODE == 'multiple' then
    return TAU_VAL * tonumber(redis.call('HGET', K_ST, 'mean') or TAU_INIT)
  end
  return nil
end

local function split(s)
  local out = {}
  for w in string.gmatch(s, '%S+') do out[#out + 1] = w end
  return out
end

local function stnum(field)
  return tonumber(redis.call('HGET', K_ST, field) or '0')
end

-- Service statistics shared by all processes (sjf_core.service.ServiceStats, by predicted
-- class): expected service seconds of a request of class klass with expected_tokens.
local function expected_s(klass, tokens)
  local spt = tonumber(redis.call('HGET', K_ST, 'spt') or '')
  if tokens > 0 and spt then return tokens * spt end
  if klass < 0 or klass > 2 then klass = 1 end
  return tonumber(redis.call('HGET', K_ST, 'sp' .. klass) or SEEDS[klass + 1])
end

-- ServiceStats.observe: one completed request of predicted class klass held its slot s
-- seconds and answered `tokens` tokens (<= 0: unknown).
local function observe_service(klass, s, tokens)
  if not (s >= 0) or s == math.huge then return end
  if klass >= 0 and klass <= 2 then
    local f = 'sp' .. klass
    local m = tonumber(redis.call('HGET', K_ST, f) or SEEDS[klass + 1])
    redis.call('HSET', K_ST, f, num(m + SALPHA * (s - m)))
  end
  if tokens > 0 then
    local x = s / tokens
    local spt = tonumber(redis.call('HGET', K_ST, 'spt') or '')
    if spt then x = spt + SALPHA * (x - spt) end
    redis.call('HSET', K_ST, 'spt', num(x))
  end
end
