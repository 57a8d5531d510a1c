-- ratekeeper: one check (or peek) of one key against a whole rule set, atomically.
--
-- KEYS[1]  the key's log: one string, a header then a ring of 5-byte timestamps
-- KEYS[2]  (optional) the key's policy record, a hash: s and b, a safelist and a
--          blocklist entry ("<until ms> <reason>"); t, a tier; o, an override
--          ("<limit>:<window ms>;..." shortest window first)
-- KEYS[3]  (optional, with KEYS[2]) the record of the bans the key earned in the
--          check's scope: b, a blocklist entry judged after KEYS[2]'s s and b
-- ARGV[1]  "c" to check (log `cost` units on admission), "p" to peek (never write)
-- ARGV[2]  cost
-- ARGV[3]  now in ms, or "" to use the Redis server clock (TIME)
-- ARGV[4]  n, the number of the caller's rules
-- ARGV[5]  the rules' windows as the header stores them (5 bytes each)
-- ARGV[6 .. 5+n]  the limit of each rule, then ARGV[6+n .. 5+2n] its window (ms),
--          shortest window first
-- ARGV[6+2n ..]  the tiers a stored tier may select, each: name, k, windows, k limits,
--          k windows
--
-- Returns {now, allowed (0/1), kind, detail, until, then per rule: units in the window
--          before this check, oldest timestamp in the window (-1: none), time the
--          check would fit (-1: n/a)}. kind 0: the rules decided, and detail says
--          which: "" the caller's, "t<name>" a stored tier, "o<rules>" the override.
--          kind 1 (safelisted, allowed) and 2 (blocked, denied): no rule was
--          consulted; detail is the reason, until when the entry lapses.
--
-- The log's layout and rules are described once, in the engine crate's docs
-- (engine/src/lib.rs). This script is the engine's Lua twin (engine/src/log.rs),
-- for Redis servers that load no modules; a differential test
-- (core/tests/integration/engine_differential.rs) holds the two to equal replies and stored bytes.
-- This runs on every request: the common path makes five Redis calls (TIME, HMGET of the
-- policy record, GETRANGE, SETRANGE, SETRANGE), encodes only what changed and makes three
-- functions. (A Lua function is made afresh on every run, its upvalues found one by one,
-- and costs more than a short body written out: the pointers' moves and the header are
-- written in line.)

local byte, char, sub, rep, floor = string.byte, string.char, string.sub, string.rep, math.floor
local min, max = math.min, math.max

local key = KEYS[1]
local writing = ARGV[1] == 'c'
local cost = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
-- the Redis clock, when this check runs on it (TTLs always do)
local clock = nil
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000 + floor(t[2] / 1000)
  clock = now
end

-- 5- and 6-byte big-endian integers, unrolled.
local function enc5(x)
  local e = x % 256; x = (x - e) / 256
  local d = x % 256; x = (x - d) / 256
  local c = x % 256; x = (x - c) / 256
  local b = x % 256
  return char((x - b) / 256 % 256, b, c, d, e)
end

local function dec5(s, at)
  local a, b, c, d, e = byte(s, at, at + 4)
  return (((a * 256 + b) * 256 + c) * 256 + d) * 256 + e
end

-- The rules: the caller's, unless the key's record lists it or selects others.
local n = tonumber(ARGV[4])
local WINDOWS = ARGV[5]
local first = 6
local detail = ''
local limits, windows = {}, {}
local override = nil
if KEYS[2] then
  local rec = redis.call('HMGET', KEYS[2], 's', 'b', 't', 'o')
  -- s, b, then the ban earned in the scope (read only when neither listed it)
  for i = 1, 3 do
    local field = rec[i]
    if i == 3 then field = KEYS[3] and redis.call('HMGET', KEYS[3], 'b')[1] end
    if field then
      local u, why = string.match(field, '^(%d+) ?(.*)$')
      local kind = i == 1 and 1 or 2
      if u and tonumber(u) > now then return {now, 2 - kind, kind, why, tonumber(u)} end
    end
  end
  if rec[4] then
    override = rec[4]
    detail = 'o' .. override
  elseif rec[3] then
    local i = 6 + 2 * n
    while i <= #ARGV do
      local k = tonumber(ARGV[i + 1])
      if ARGV[i] == rec[3] then
        n, WINDOWS, first, detail = k, ARGV[i + 2], i + 3, 't' .. rec[3]
        break
      end
      i = i + 3 + 2 * k
    end
  end
end
if override then
  n = 0
  local parts = {}
  for l, w in string.gmatch(override, '(%d+):(%d+)') do
    n = n + 1
    limits[n], windows[n] = tonumber(l), tonumber(w)
    parts[n] = enc5(windows[n])
  end
  WINDOWS = table.concat(parts)
else
  for i = 1, n do
    limits[i], windows[i] = tonumber(ARGV[first + i - 1]), tonumber(ARGV[first + n + i - 1])
  end
end
local cap, longest = 0, 0
for i = 1, n do
  if limits[i] > cap then cap = limits[i] end
  if windows[i] > longest then longest = windows[i] end
end

local VERSION = 4
local W = 5                       -- bytes per unit
local FIXED = 29
local H = FIXED + 15 * n
local RULES_AT = FIXED + 5 * n    -- where the per-rule pointers start
local SPAN = 1099511627776        -- 2^40: the range of a stored timestamp

-- State of the log: N units ever logged, those numbered lo .. N-1 kept in the ring.
-- Per rule: p, the oldest unit in its window, that unit's timestamp (tsp), and raw, its
-- 5 bytes to store when they are not the ones stored already (nil: as stored).
-- A stored timestamp e (ms modulo 2^40) reads back as the latest time at or before the
-- newest unit that it can stand for: newest - (newest % SPAN - e) % SPAN.
local N, room, newest, lo, expire_at = 0, 0, 0, 0, 0
local p, tsp, raw = {}, {}, {}
-- what the stored header held, so that only what changed is encoded again
local room_in, expire_in, p_in = -1, -1, {}
-- When the stored log does not fit this rule set, its units are held here
-- (number -> timestamp) and the whole string is rewritten at the end.
local tbl = nil
local NONE = rep('\0', W)

-- The timestamp of unit s.
local function entry(s)
  if tbl then return tbl[s] end
  local off = H + (s % cap) * W
  return newest - (newest % SPAN - dec5(redis.call('GETRANGE', key, off, off + W - 1), 1)) % SPAN
end

local hdr = redis.call('GETRANGE', key, 0, H - 1)
local fresh = #hdr == 0
local fits = #hdr == H and byte(hdr, 1) == VERSION and byte(hdr, 2) == n and dec5(hdr, 8) >= cap
  and sub(hdr, FIXED + 1, RULES_AT) == WINDOWS

if fits then
  -- the header's numbers from one read of their bytes (a dec5 apiece costs more)
  local n1, n2, n3, n4, n5, c1, c2, c3, c4, c5, r1, r2, r3, r4, r5,
    t1, t2, t3, t4, t5, t6, e1, e2, e3, e4, e5, e6 = byte(hdr, 3, 29)
  N = (((n1 * 256 + n2) * 256 + n3) * 256 + n4) * 256 + n5
  cap = (((c1 * 256 + c2) * 256 + c3) * 256 + c4) * 256 + c5
  room = (((r1 * 256 + r2) * 256 + r3) * 256 + r4) * 256 + r5
  room_in = room
  newest = ((((t1 * 256 + t2) * 256 + t3) * 256 + t4) * 256 + t5) * 256 + t6
  expire_at = ((((e1 * 256 + e2) * 256 + e3) * 256 + e4) * 256 + e5) * 256 + e6
  expire_in = expire_at
  lo = max(0, N - cap)
  local m = newest % SPAN
  for i = 1, n do
    local at = RULES_AT + 10 * i - 9
    local a1, a2, a3, a4, a5, b1, b2, b3, b4, b5 = byte(hdr, at, at + 9)
    p[i] = (((a1 * 256 + a2) * 256 + a3) * 256 + a4) * 256 + a5
    p_in[i] = p[i]
    tsp[i] = newest - (m - ((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5)) % SPAN
  end
elseif not fresh then
  -- Written for other rules: keep every stored unit still inside the longest window
  -- of a check at the newest unit's time (no later check is earlier), renumbered
  -- from 0; the ring grows to hold them all if the new limits are smaller.
  local all = redis.call('GET', key)
  tbl = {}
  if #all >= FIXED and byte(all, 1) == VERSION then
    local old_h = FIXED + 15 * byte(all, 2)
    local old_n, old_cap = dec5(all, 3), dec5(all, 8)
    newest = dec5(all, 18) * 256 + byte(all, 23)
    local m = newest % SPAN
    local horizon = newest - longest
    for s = max(0, old_n - old_cap), old_n - 1 do
      local ts = newest - (m - dec5(all, old_h + (s % old_cap) * W + 1)) % SPAN
      if ts > horizon then
        tbl[N] = ts
        N = N + 1
      end
    end
    if N > cap then cap = N end
  end
end

-- A clock never runs backwards for one key: a check older than the newest unit is
-- taken at that unit's time. After a jump of over 17 years every unit is out of
-- every window (and its stored timestamp would be ambiguous): start afresh.
if now < newest then now = newest end
if not (fits or tbl) or now - newest >= SPAN / 2 then
  -- a fresh log
  tbl = {}
  N, room, lo, expire_at = 0, 0, 0, 0
end
if tbl then
  -- a log held in tbl: every pointer at its first unit
  local t = tbl[0]
  for i = 1, n do p[i] = 0; tsp[i] = t or 0; raw[i] = t and enc5(t % SPAN) or NONE end
end

-- Each rule's count, and its pointer moved to the oldest unit still inside its window
-- when the one it points at has left it: a scan of the next 32 units in one read, then
-- a binary search for a burst. (Written out here rather than as a function: a Lua
-- function is made afresh on every run of the script, and costs more than its body.)
local result = {now, 1, 0, detail, 0}
local allowed = 1
for i = 1, n do
  local w = windows[i]
  local s = p[i]
  if s < lo or (s < N and tsp[i] + w <= now) then
    repeat
      if s < lo then
        s = lo
        tsp[i] = entry(s)
        raw[i] = enc5(tsp[i] % SPAN)
      end
      if s >= N or tsp[i] + w > now then break end
      s = s + 1
      local k = min(N - s, 32)
      if not tbl then k = min(k, cap - s % cap) end
      if k > 0 then
        local found = nil
        if tbl then
          for j = 0, k - 1 do
            local t = tbl[s + j]
            if t + w > now then found = j; tsp[i] = t; raw[i] = enc5(t % SPAN); break end
          end
        else
          local off = H + (s % cap) * W
          local chunk = redis.call('GETRANGE', key, off, off + k * W - 1)
          local m = newest % SPAN
          for j = 0, k - 1 do
            local t = newest - (m - dec5(chunk, j * W + 1)) % SPAN
            if t + w > now then found = j; tsp[i] = t; raw[i] = sub(chunk, j * W + 1, j * W + W); break end
          end
        end
        if found then s = s + found; break end
        s = s + k
      end
      local a, b = s, N
      while a < b do
        local mid = floor((a + b) / 2)
        if entry(mid) + w > now then b = mid else a = mid + 1 end
      end
      s = a
      if a < N then
        tsp[i] = entry(a)
        raw[i] = enc5(tsp[i] % SPAN)
      end
    until true
    p[i] = s
  end
  local count = N - s
  result[3 * i + 3] = count
  result[3 * i + 4] = count > 0 and tsp[i] or -1
  result[3 * i + 5] = -1
  if count + cost > limits[i] then allowed = 0 end
end
if allowed == 0 then
  result[2] = 0
  -- when each rule would take this check: once the units over its limit have left it
  for i = 1, n do
    local over = result[3 * i + 3] + cost - limits[i]
    if over > 0 and cost <= limits[i] then
      result[3 * i + 5] = entry(p[i] + over - 1) + windows[i]
    end
  end
end

-- A denied check writes nothing but a rebuilt log: pointers it moved are not kept,
-- since a later check may be earlier than this one (though never than the newest
-- unit) and pointers only move forward.
if not writing or (allowed == 0 and not tbl) then return result end
if allowed == 0 and fresh then return result end

-- Writing.
local admitted = allowed == 1
if not admitted then
  -- a rebuilt log, its pointers at its first unit
  for i = 1, n do
    p[i] = 0
    if N > 0 then tsp[i] = tbl[0]; raw[i] = enc5(tbl[0] % SPAN) else tsp[i] = 0; raw[i] = NONE end
  end
end
local unit = enc5(now % SPAN)
local before = N
if admitted then
  for i = 1, n do
    if p[i] == N then tsp[i] = now; raw[i] = unit end
  end
  N = N + cost
  newest = now
end

-- The key must outlive its newest unit by the longest window. The TTL is a quarter
-- more than that, so on the Redis clock it needs renewing only every quarter window,
-- and at least a second, so that a log of millisecond windows outlives the round
-- trips between its checks.
local TTL = max(longest + floor(longest / 4), 1000)
local used = min(N, cap)
local rewrite = tbl or used > room
local renew = admitted and not (clock and clock + longest <= expire_at)
if renew or rewrite then expire_at = clock and clock + TTL or 0 end

-- The ring, when the whole string is (re)written: in the layout of this rule set, or
-- with a bigger ring.
local slots = nil
if rewrite then
  -- Redis keeps a string in one allocation of its length plus an sds header and a
  -- terminator, which jemalloc rounds up to a size class (four per doubling above
  -- 128 bytes): slots up to the end of that class cost nothing.
  local function size_class(bytes)
    if bytes <= 128 then return math.ceil(bytes / 16) * 16 end
    local q = 128
    while q * 2 < bytes do q = q * 2 end
    return math.ceil(bytes / (q / 4)) * (q / 4)
  end
  local function sds_extra(len)
    if len < 256 then return 4 elseif len < 65536 then return 6 else return 10 end
  end
  slots = {}
  if tbl then
    if admitted then
      for s = before, N - 1 do tbl[s] = now end
    end
    for s = max(0, N - cap), N - 1 do slots[s % cap + 1] = enc5(tbl[s] % SPAN) end
  else
    -- growing, so before < cap: the ring holds units 0 .. before-1 in slots 0 .. before-1
    local body = before > 0 and redis.call('GETRANGE', key, H, H + before * W - 1) or ''
    if N <= cap then
      slots = {body, rep(unit, cost)}
    else
      local wrapped = N - cap
      slots = {rep(unit, wrapped), sub(body, wrapped * W + 1), rep(unit, cost - wrapped)}
    end
  end
  local extra = sds_extra(H + used * W)
  room = floor((size_class(H + used * W + extra) - extra - H) / W)
  if sds_extra(H + room * W) > extra then room = room - 1 end
  room = min(cap, max(used, room))
  slots[#slots + 1] = rep(NONE, room - used)
end

-- The header, from its unchanged bytes and what changed.
local sizes = fits and room == room_in and sub(hdr, 8, 17) or enc5(cap) .. enc5(room)
local last = (admitted or tbl) and enc5(floor(newest / 256)) .. char(newest % 256) or sub(hdr, 18, 23)
local expiry = expire_at == expire_in and sub(hdr, 24, 29) or enc5(floor(expire_at / 256)) .. char(expire_at % 256)
local parts = {char(VERSION, n) .. enc5(N) .. sizes .. last .. expiry .. WINDOWS}
for i = 1, n do
  local at = RULES_AT + 10 * i - 9
  if p[i] ~= p_in[i] then
    parts[i + 1] = enc5(p[i]) .. (raw[i] or sub(hdr, at + 5, at + 9))
  elseif raw[i] then
    parts[i + 1] = sub(hdr, at, at + 4) .. raw[i]
  else
    parts[i + 1] = sub(hdr, at, at + 9)
  end
end
local head = table.concat(parts)

if slots then
  redis.call('SET', key, head .. table.concat(slots), 'PX', TTL)
  return result
end
if admitted then
  local slot = before % cap
  local first = min(cost, cap - slot)
  redis.call('SETRANGE', key, H + slot * W, rep(unit, first))
  if cost > first then
    redis.call('SETRANGE', key, H, rep(unit, cost - first))
  end
end
redis.call('SETRANGE', key, 0, head)
if renew then redis.call('PEXPIRE', key, TTL) end
return result
