-- ratekeeper: a hold (or a peek) of a key whose rule set has an in-flight rule:
-- its live leases counted and its rates checked, and a lease taken, in one step.
--
-- This script follows bands.lua and log.lua (see `HOLD_SCRIPT` in engine/src/lib.rs),
-- whose `check` it calls for the rates.
--
-- KEYS[1]       the key's leases: a sorted set of lease ids, each scored by the time
--               (ms) it lapses at, in the key's Cluster slot; and a member "" scored
--               -1, never live and never lapsed (lapsed leases are those scored from 0
--               to now), so that the set is not made on every hold and deleted on
--               every release (the module's command makes it once, with the set)
-- KEYS[2 ..]    check.lua's KEYS (the log, the records); none when the rule set has no
--               rate
-- ARGV[1]       "h" to hold (take a lease when a slot is free and the rates admit),
--               "q" to peek (write nothing)
-- ARGV[2]       the in-flight rule's limit; ARGV[3] the lease's time (ms); ARGV[4] the
--               random part of its id: the lease is "<now ms>-<ARGV[4]>", held since now
-- ARGV[5]       now in ms, or "" to use the Redis server clock (TIME)
-- ARGV[6 ..]    check.lua's ARGV (its mode "c" to hold, "p" to peek; its now is ARGV[5])
--
-- The rates are checked with their writes held back (as meters.lua holds them): they
-- are made only when a lease is taken, so a hold refused for want of a slot logs
-- nothing. A listed key (check.lua's kind 1 or 2) takes no lease.
--
-- Returns {check.lua's reply (0 without rates), live leases before this hold, 1 when a
-- lease was taken else 0, the time the soonest live lease lapses, the one taken
-- included (-1: none), now (ms)}.

local leases = KEYS[1]
local taking = ARGV[1] == 'h'
local limit, lease_ms, id = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local now = tonumber(ARGV[5])
local reply, admitted, writes = 0, true, {}
if #KEYS > 1 then
  reply = check(KEYS[2], KEYS[3], KEYS[4], ARGV, 5, #ARGV, writes)
  if reply[3] ~= 0 then return {reply, 0, 0, -1, reply[1]} end
  now = reply[1]
  admitted = reply[2] == 1
elseif not now then
  local t = call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
local at = string.format('%d', now)
local live = call('ZCOUNT', leases, '(' .. at, '+inf')
local soonest = call('ZRANGEBYSCORE', leases, '(' .. at, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]
local taken = 0
if taking and admitted and live < limit then
  for j = 1, #writes do call(unpack(writes[j])) end
  call('ZREMRANGEBYSCORE', leases, 0, at)
  -- the lease, and the member "" the set keeps beside its leases
  call('ZADD', leases, -1, '', string.format('%d', now + lease_ms), at .. '-' .. id)
  -- (a quarter more, so that a key held again soon keeps its expiry)
  if call('PTTL', leases) < lease_ms then
    call('PEXPIRE', leases, lease_ms + math.floor(lease_ms / 4))
  end
  taken = 1
  soonest = soonest or now + lease_ms
end
return {reply, live, taken, soonest and tonumber(soonest) or -1, now}
