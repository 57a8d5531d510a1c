-- ratekeeper: a key's leases (see hold.lua) released, extended or listed.
--
-- KEYS[1]  the key's leases (a sorted set: lease id, scored by its lapse time in ms)
-- ARGV[1]  "r" to release the lease ARGV[2], "e" to make it lapse ARGV[3] ms from
--          now, "l" to list the live leases
-- ARGV[4]  now in ms, or "" to use the Redis server clock (TIME)
--
-- A lease that lapsed is gone: releasing or extending it changes nothing (and drops
-- its entry). Returns the lapse time (ms) of the lease released (the one it had) or
-- extended (its new one), 0 when it was not held; or every live lease, as a flat list:
-- id, lapse time (ms), ...

local key, call, id = KEYS[1], ARGV[1], ARGV[2]
local now = tonumber(ARGV[4])
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
end
local at = string.format('%d', now)
if call == 'l' then
  return redis.call('ZRANGEBYSCORE', key, '(' .. at, '+inf', 'WITHSCORES')
end
local lapse = tonumber(redis.call('ZSCORE', key, id) or nil)
if not lapse then return 0 end
if lapse <= now then
  redis.call('ZREM', key, id)
  return 0
end
if call == 'r' then
  redis.call('ZREM', key, id)
  return lapse
end
local lease_ms = tonumber(ARGV[3])
redis.call('ZADD', key, string.format('%d', now + lease_ms), id)
-- (a quarter more, as hold.lua's)
if redis.call('PTTL', key) < lease_ms then
  redis.call('PEXPIRE', key, lease_ms + math.floor(lease_ms / 4))
end
return now + lease_ms
