-- ratekeeper: one check (or peek, or settle) of a key's several meters, all or nothing.
--
-- This script is check.lua's body made the function `check(KEYS, ARGV)` (see
-- `METERS_SCRIPT` in engine/src/lib.rs), then what follows. Each meter is a log of its
-- own, in the key's Cluster slot; no record is read.
--
-- KEYS[1 .. m]  each meter's log (check.lua's KEYS[1])
-- ARGV[1]       m; then per meter: k, the number of its arguments, then its k arguments
--               as check.lua takes them (its ARGV[1 .. k]); every meter's mode is one
--
-- A check logs its cost on every meter or on none: every meter but the last is peeked,
-- the last is checked when they all admit (peeked else), and only when it admits too
-- are the others checked. A peek that admits at a time admits at any later one (units
-- only ever leave a window), so each of those checks admits as its peek did.
--
-- Returns check.lua's reply of each meter, in order.

local m = tonumber(ARGV[1])
local calls, at = {}, 2
for i = 1, m do
  local k = tonumber(ARGV[at])
  calls[i] = {unpack(ARGV, at + 1, at + k)}
  at = at + 1 + k
end

local replies = {}
if string.sub(calls[1][1], 1, 1) ~= 'c' then
  -- a peek, or a settle (whose overrun is logged whatever the limits say)
  for i = 1, m do replies[i] = check({KEYS[i]}, calls[i]) end
  return replies
end

local function peek(args)
  local copy = {unpack(args)}
  copy[1] = 'p' .. string.sub(args[1], 2)
  return copy
end

local admitted = true
for i = 1, m - 1 do
  replies[i] = check({KEYS[i]}, peek(calls[i]))
  admitted = admitted and replies[i][2] == 1
end
replies[m] = check({KEYS[m]}, admitted and calls[m] or peek(calls[m]))
if admitted and replies[m][2] == 1 then
  for i = 1, m - 1 do replies[i] = check({KEYS[i]}, calls[i]) end
end
return replies
