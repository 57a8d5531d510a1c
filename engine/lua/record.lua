-- ratekeeper: changes to a key's record (its listings, tier and override), and fail2ban strikes.
--
-- ARGV[1] "set": KEYS[1] the key's record (a hash, see check.lua); ARGV[2] now (ms);
--         ARGV[3] a field; ARGV[4] its value (none: remove the field). The record
--         then lasts while it holds a tier or an override, else until its last
--         listing lapses. Returns 1.
-- ARGV[1] "strike": KEYS[1] the key's strikes (a list, newest first); ARGV[2] now in
--         ms or "" for the Redis clock; ARGV[3] maxretry; ARGV[4] findtime (ms).
--         Returns {now, strikes within findtime, 1 when they reach maxretry (the
--         strikes are then cleared) else 0}.

local op, key = ARGV[1], KEYS[1]

if op == 'set' then
  local now = tonumber(ARGV[2])
  if ARGV[4] then
    redis.call('HSET', key, ARGV[3], ARGV[4])
  else
    redis.call('HDEL', key, ARGV[3])
  end
  local rec = redis.call('HMGET', key, 's', 'b', 't', 'o')
  if rec[3] or rec[4] then
    redis.call('PERSIST', key)
    return 1
  end
  local last = 0
  for i = 1, 2 do
    if rec[i] then
      local u = tonumber(string.match(rec[i], '^(%d+)'))
      if u and u > last then last = u end
    end
  end
  if last > now then
    redis.call('PEXPIRE', key, last - now)
  else
    redis.call('DEL', key)
  end
  return 1
end

if op == 'strike' then
  local now = tonumber(ARGV[2])
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local maxretry, findtime = tonumber(ARGV[3]), tonumber(ARGV[4])
  redis.call('LPUSH', key, now)
  redis.call('LTRIM', key, 0, maxretry - 1)
  local count = 0
  for _, at in ipairs(redis.call('LRANGE', key, 0, -1)) do
    if tonumber(at) > now - findtime then count = count + 1 end
  end
  if count >= maxretry then
    redis.call('DEL', key)
    return {now, count, 1}
  end
  redis.call('PEXPIRE', key, findtime)
  return {now, count, 0}
end

return redis.error_reply('ratekeeper: unknown record op ' .. tostring(op))
