-- ratekeeper: one check (or peek) of one key against a whole rule set, atomically.
--
-- KEYS[1]  the key's log: one string, a header then a ring of 5-byte timestamps
-- ARGV[1]  "c" to check (log `cost` units on admission), "p" to peek (never write)
-- ARGV[2]  cost
-- ARGV[3]  now in ms, or "" to use the Redis server clock (TIME)
-- ARGV[4], ARGV[5], ...  limit and window (ms) of each rule, shortest window first
--
-- Returns {now, allowed (0/1), then per rule: units in the window before this check,
--          oldest timestamp in the window (-1: none), time the check would fit (-1: n/a)}.
--
-- Layout (numbers big-endian; 5 bytes unless said otherwise):
--   header  version (1 byte) | rule count (1 byte) | N, units ever logged | cap, ring
--           capacity (>= the largest limit) | room, ring slots allocated | newest
--           timestamp (6 bytes) | when the key's TTL runs out by the Redis clock (6 bytes;
--           0: unknown) | per rule: window | p, number of the oldest unit in that
--           window | timestamp of unit p
--   ring    unit number s sits in slot s % cap, as its timestamp in ms modulo 2^40,
--           read back relative to the newest timestamp (exact for 34 years).
-- A rule's pointer p only moves forward, so a check reads the header and touches ring
-- entries only when units leave a window: its cost does not grow with the limit.
-- The string grows by rewriting it exactly (never by SETRANGE past its end, which
-- makes Redis reserve up to twice the size), so a unit costs 5 bytes plus rounding.

local key = KEYS[1]
local writing = ARGV[1] == 'c'
local cost = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
-- the Redis clock, when this check runs on it (TTLs always do)
local clock = nil
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  clock = now
end

local n = (#ARGV - 3) / 2
local limits, windows = {}, {}
local cap, longest = 0, 0
for i = 1, n do
  limits[i] = tonumber(ARGV[2 + 2 * i])
  windows[i] = tonumber(ARGV[3 + 2 * i])
  if limits[i] > cap then cap = limits[i] end
  if windows[i] > longest then longest = windows[i] end
end

local VERSION = 3
local W = 5                       -- bytes per unit
local FIXED = 29
local PER_RULE = 15
local H = FIXED + PER_RULE * n
local SPAN = 1099511627776        -- 2^40: the range of a stored timestamp
local EXACT_GROWTH = 1024         -- strings up to this size grow to the exact size

local byte, char, sub, rep, floor = string.byte, string.char, string.sub, string.rep, math.floor
local ZERO = rep('\0', W)

-- 5- and 6-byte big-endian integers, unrolled (this runs on every check).
local function enc5(x)
  local e = x % 256; x = (x - e) / 256
  local d = x % 256; x = (x - d) / 256
  local c = x % 256; x = (x - c) / 256
  local b = x % 256
  return char((x - b) / 256 % 256, b, c, d, e)
end

local function enc6(x)
  local f = x % 256
  return enc5((x - f) / 256) .. char(f)
end

local function dec5(s, at)
  local a, b, c, d, e = byte(s, at, at + 4)
  return (((a * 256 + b) * 256 + c) * 256 + d) * 256 + e
end

local function dec6(s, at)
  return dec5(s, at) * 256 + byte(s, at + 5)
end

-- State of the log. Units numbered lo .. N-1 are kept in the ring.
local N, room, newest, lo, expire_at = 0, 0, 0, 0, 0
local p, tsp = {}, {}
-- When the stored log does not fit this rule set, its units are held here
-- (number -> timestamp) and the whole string is rewritten at the end.
local tbl = nil

local function unstamp(e)
  return newest - (newest % SPAN - e) % SPAN
end

local function entry(s)
  if tbl then return tbl[s] end
  local off = H + (s % cap) * W
  return unstamp(dec5(redis.call('GETRANGE', key, off, off + W - 1), 1))
end

local function start_table()
  tbl = {}
  N, room, lo = 0, 0, 0
  for i = 1, n do p[i] = 0; tsp[i] = 0 end
end

-- Re-reads a log written for other rules, keeping every unit the new rules can see.
local function rebuild(all)
  start_table()
  if #all < FIXED or byte(all, 1) ~= VERSION then return end
  local old_h = FIXED + PER_RULE * byte(all, 2)
  local old_n = dec5(all, 3)
  local old_cap = dec5(all, 8)
  newest = dec6(all, 18)
  local horizon = math.max(now, newest) - longest
  for s = math.max(0, old_n - old_cap), old_n - 1 do
    local ts = unstamp(dec5(all, old_h + (s % old_cap) * W + 1))
    if ts > horizon then
      tbl[N] = ts
      N = N + 1
    end
  end
  if N > cap then cap = N end
  for i = 1, n do tsp[i] = tbl[0] or 0 end
end

local hdr = redis.call('GETRANGE', key, 0, H - 1)
local fresh = #hdr == 0
if fresh then
  start_table()
else
  -- the stored ring fits when it has these windows and room for the largest limit
  local fits = #hdr == H and byte(hdr, 1) == VERSION and byte(hdr, 2) == n
    and dec5(hdr, 8) >= cap
  for i = 1, n do
    if fits and dec5(hdr, FIXED + PER_RULE * (i - 1) + 1) ~= windows[i] then fits = false end
  end
  if fits then
    N = dec5(hdr, 3)
    cap = dec5(hdr, 8)
    room = dec5(hdr, 13)
    newest = dec6(hdr, 18)
    expire_at = dec6(hdr, 24)
    lo = math.max(0, N - cap)
    for i = 1, n do
      local at = FIXED + PER_RULE * (i - 1) + 1
      p[i] = dec5(hdr, at + 5)
      tsp[i] = unstamp(dec5(hdr, at + 10))
    end
  else
    rebuild(redis.call('GET', key))
  end
end

-- A clock never runs backwards for one key: a check older than the newest unit is
-- taken at that unit's time. After a jump of over 17 years every unit is out of
-- every window (and its stored timestamp would be ambiguous): start afresh.
if now < newest then now = newest end
if now - newest >= SPAN / 2 then start_table() end

local CHUNK = 32
local moved = false

-- Moves rule i's pointer to the oldest unit still inside its window.
local function advance(i)
  local w = windows[i]
  local s, ts = p[i], tsp[i]
  if s < lo then s = lo; ts = entry(s) end
  if s >= N or ts + w > now then
    if s ~= p[i] then p[i] = s; tsp[i] = ts; moved = true end
    return
  end
  moved = true
  s = s + 1
  -- first a short scan, read in one call
  local k = math.min(N - s, CHUNK)
  if not tbl then k = math.min(k, cap - s % cap) end
  if k > 0 then
    local chunk = nil
    if not tbl then
      local off = H + (s % cap) * W
      chunk = redis.call('GETRANGE', key, off, off + k * W - 1)
    end
    for j = 0, k - 1 do
      local t = chunk and unstamp(dec5(chunk, j * W + 1)) or tbl[s + j]
      if t + w > now then p[i] = s + j; tsp[i] = t; return end
    end
    s = s + k
  end
  -- then a binary search over the rest
  local a, b = s, N
  while a < b do
    local mid = floor((a + b) / 2)
    if entry(mid) + w > now then b = mid else a = mid + 1 end
  end
  p[i] = a
  tsp[i] = a < N and entry(a) or 0
end

local counts = {}
local allowed = 1
for i = 1, n do
  advance(i)
  counts[i] = N - p[i]
  if counts[i] + cost > limits[i] then allowed = 0 end
end

local result = {now, allowed}
for i = 1, n do
  local over = counts[i] + cost - limits[i]
  local free_at = -1
  if allowed == 0 and over > 0 and cost <= limits[i] then
    free_at = entry(p[i] + over - 1) + windows[i]
  end
  result[#result + 1] = counts[i]
  result[#result + 1] = counts[i] > 0 and tsp[i] or -1
  result[#result + 1] = free_at
end

if not writing then return result end

local admitted = allowed == 1
local unit = enc5(now % SPAN)

local function header()
  local parts = {char(VERSION, n), enc5(N), enc5(cap), enc5(room), enc6(newest), enc6(expire_at)}
  for i = 1, n do
    parts[i + 6] = enc5(windows[i]) .. enc5(p[i]) .. enc5(tsp[i] % SPAN)
  end
  return table.concat(parts)
end

-- The key must outlive its newest unit by the longest window. The TTL is set
-- to a quarter more than that, so on the Redis clock it needs renewing only
-- every quarter window, not on every check.
local TTL = longest + floor(longest / 4)
local function renew_ttl()
  expire_at = clock and clock + TTL or 0
end
local function ttl_is_long_enough()
  return clock ~= nil and clock + longest <= expire_at
end

-- Log the new units in the state first (the pointers of empty windows start at them).
local before = N
if admitted then
  for i = 1, n do
    if p[i] == N then tsp[i] = now end
  end
  N = N + cost
  newest = now
end

if tbl then
  if fresh and not admitted then return result end
  -- write the whole log, exactly sized, in the layout of this rule set
  if admitted then
    for s = before, N - 1 do tbl[s] = now end
  end
  local slots = {}
  for s = math.max(0, N - cap), N - 1 do slots[s % cap + 1] = enc5(tbl[s] % SPAN) end
  room = #slots
  renew_ttl()
  redis.call('SET', key, header() .. table.concat(slots), 'PX', TTL)
  return result
end

if not admitted then
  if moved then redis.call('SETRANGE', key, 0, header()) end
  return result
end

local used = math.min(N, cap)
if used > room then
  -- the ring must grow: rewrite it with exact room (small logs) or 25% to spare
  local body = before > 0 and redis.call('GETRANGE', key, H, H + before * W - 1) or ''
  if N <= cap then
    body = body .. rep(unit, cost)
  else
    local wrapped = N - cap
    body = rep(unit, wrapped) .. sub(body, wrapped * W + 1) .. rep(unit, cost - wrapped)
  end
  room = used
  if H + used * W > EXACT_GROWTH then
    room = math.min(cap, math.max(used, math.ceil(used * 1.25)))
  end
  renew_ttl()
  redis.call('SET', key, header() .. body .. rep(ZERO, room - used), 'PX', TTL)
  return result
end

local slot = before % cap
local first = math.min(cost, cap - slot)
redis.call('SETRANGE', key, H + slot * W, rep(unit, first))
if cost > first then
  redis.call('SETRANGE', key, H, rep(unit, cost - first))
end
if ttl_is_long_enough() then
  redis.call('SETRANGE', key, 0, header())
else
  renew_ttl()
  redis.call('SETRANGE', key, 0, header())
  redis.call('PEXPIRE', key, TTL)
end
return result
