-- ratekeeper: one check (or peek, or settle) of a key's several meters, all or nothing.
--
-- This script is check.lua's body made the function `check(KEYS, ARGV, redis)` (see
-- `METERS_SCRIPT` in engine/src/lib.rs), then what follows. Each meter is a log of its
-- own, in the key's Cluster slot; no record is read.
--
-- KEYS[1 .. m]  each meter's log (check.lua's KEYS[1])
-- ARGV[1]       m; then per meter: k, the number of its arguments, then its k arguments
--               as check.lua takes them (its ARGV[1 .. k]); every meter's mode is one
--
-- Each meter is checked by check.lua with its writes held back (it reads its own log
-- before it writes it, and no other): a check's writes are made only when every meter
-- admitted, so it logs its cost on every meter or on none; a settle's always. Every
-- meter on the server clock reads it once (the first TIME is every meter's), as the
-- module's command does.
--
-- Returns check.lua's reply of each meter, in order.

local real = redis
local WRITES = {SET = true, SETRANGE = true, PEXPIRE = true}
local m = tonumber(ARGV[1])
local held, replies, at = {}, {}, 2
local admitted = true
local writes, time = nil, nil
-- check.lua's `redis`: its reads made at once (TIME once), its writes held
local holding = {call = function(command, ...)
  if WRITES[command] then
    writes[#writes + 1] = {command, ...}
    return true
  end
  if command == 'TIME' then
    time = time or real.call('TIME')
    return time
  end
  return real.call(command, ...)
end}
for i = 1, m do
  local k = tonumber(ARGV[at])
  writes = {}
  replies[i] = check({KEYS[i]}, {unpack(ARGV, at + 1, at + k)}, holding)
  admitted = admitted and replies[i][2] == 1
  held[i] = writes
  at = at + 1 + k
end
if admitted or string.sub(ARGV[3], 1, 1) == 's' then
  for i = 1, m do
    for _, write in ipairs(held[i]) do real.call(unpack(write)) end
  end
end
return replies
