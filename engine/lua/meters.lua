-- ratekeeper: one check (or peek, or settle) of a key's several meters, all or nothing.
--
-- This script follows bands.lua and log.lua (see `METERS_SCRIPT` in engine/src/lib.rs),
-- whose `check` it calls once per meter. Each meter is a log of its own, in the key's
-- Cluster slot; no record is read.
--
-- KEYS[1 .. m]  each meter's log (check.lua's KEYS[1])
-- ARGV[1]       m; then per meter: k, the number of its arguments, then its k arguments
--               as check.lua takes them (its ARGV[1 .. k]); every meter's mode is one
--
-- Each meter is checked with its writes held back (it reads its own log before it writes
-- it, and no other): a check's writes are made only when every meter admitted, so it
-- logs its cost on every meter or on none; a settle's always. Every meter on the server
-- clock reads it once (the first TIME is every meter's), as the module's command does.
--
-- Returns check.lua's reply of each meter, in order.

local m = ARGV[1] + 0
local held, replies, at = {}, {}, 2
local admitted = true
for i = 1, m do
  local k = ARGV[at] + 0
  replies[i] = check(KEYS[i], nil, nil, ARGV, at, at + k, held)
  admitted = admitted and replies[i][2] == 1
  at = at + 1 + k
end
if admitted or sub(ARGV[3], 1, 1) == 's' then
  for j = 1, #held do call(unpack(held[j])) end
end
return replies
