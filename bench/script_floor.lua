-- The floor of any rate-limit check through a Lua script, for bench/ruby_bench.rb:
-- the four Redis calls ratekeeper's check.lua makes on its common path (TIME, HMGET
-- of the policy record, one GETRANGE of the header and the first band's first
-- entries, one SETRANGE of the header and the new entry) on a string of the size a
-- log of four rules has, and a reply of the same shape (an admitted check against
-- four rules), with none of the check's own work. It takes the check's keys and
-- arguments, so the request is the same size too.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('HMGET', KEYS[2], 's', 'b', 't', 'o')
redis.call('GETRANGE', KEYS[1], 0, 186 + 320)
redis.call('SETRANGE', KEYS[1], 0, string.rep('\4', 187 + 10))
return {now, 1, 0, '', 0, 0, -1, -1, 0, -1, -1, 0, -1, -1, 0, -1, -1}
