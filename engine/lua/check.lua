-- ratekeeper: one check (or peek) of one key against a whole rule set, atomically.
--
-- KEYS[1]  the key's log: one string, a header then each rule's ring of entries
-- KEYS[2]  (optional) the key's policy record, a hash: s and b, a safelist and a
--          blocklist entry ("<until ms> <reason>"); t, a tier; o, an override
--          ("<limit>:<window ms>;..." shortest window first)
-- KEYS[3]  (optional, with KEYS[2]) the record of the bans the key earned in the
--          check's scope: b, a blocklist entry judged after KEYS[2]'s s and b
-- ARGV[1]  "c" to check (log `cost` units on admission), "p" to peek (never write);
--          "cx", "px": the same, keeping every entry (never merging close ones)
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
--          before this check, its oldest entry's time (-1: none), time the
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
-- policy record, GETRANGE of the header, SETRANGE of the new entry, SETRANGE of the header)
-- and encodes again only the bands that changed.

local byte, char, sub, rep, floor = string.byte, string.char, string.sub, string.rep, math.floor
local min, max = math.min, math.max

local key = KEYS[1]
local writing = sub(ARGV[1], 1, 1) == 'c'
local exact = sub(ARGV[1], 2, 2) == 'x'
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

local DAMAGED = 'ratekeeper: the stored log is damaged (its bytes do not hold what its header says)'
local function dec5(s, at)
  local a, b, c, d, e = byte(s, at, at + 4)
  if not e then error({err = DAMAGED}) end
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
local longest = 0
for i = 1, n do
  if windows[i] > longest then longest = windows[i] end
end


local VERSION = 5
local GUARD = '\4\0\255\255\255\255\255\128\0\0\0\0'
local E = 10                      -- bytes per entry: its time's stamp, its band's running total
local FIXED = 27
local H = FIXED + 40 * n
local SPAN = 1099511627776        -- 2^40: the range of a stored time and of a running total
local flags = exact and 1 or 0

-- Each rule's band (see the engine's docs): its window, step and most entries, then its
-- header's fields: cap, head, len, out (the running total before its front), front and
-- back (their times), btot (the back's running total); stored, how many of its entries
-- (from the front) are read from the stored ring at base; pt/pc, the entries this check
-- added (times, totals) from pfrom; touched, whether it changed.
local W, step, most = {}, {}, {}
local cap, head, len, out, front, back, btot = {}, {}, {}, {}, {}, {}, {}
local stored, base, pt, pc, pfrom, touched = {}, {}, {}, {}, {}, {}
local shorter = 0
for i = 1, n do
  W[i] = windows[i]
  step[i] = exact and 1 or max(1, math.ceil(W[i] / 1024))
  most[i] = max(1, min(floor((W[i] - shorter) / step[i]) + 2, 131072))
  shorter = W[i]
end
local function empty()
  for i = 1, n do
    cap[i], head[i], len[i], out[i], front[i], back[i], btot[i] = 0, 0, 0, 0, 0, 0, 0
    stored[i], base[i], pt[i], pc[i], pfrom[i], touched[i] = 0, 0, {}, {}, 1, false
  end
end

local newest, expire_at = 0, 0
-- the stored log's newest time (and it modulo 2^40), which its stamps are read back against
local t0, m = 0, 0
local function unstamp(e) return t0 - (m - e) % SPAN end

-- Entry j (from 0, its front) of band i: (time, running total), from the stored ring
-- (32 entries read at once) or from what this check added.
local ct, cc = {}, {}
local function entry(i, j)
  if j < stored[i] then
    local slot = (head[i] + j) % cap[i]
    local off = base[i] + slot * E
    if not ct[off] then
      local k = min(32, cap[i] - slot, stored[i] - j)
      local chunk = redis.call('GETRANGE', key, off, off + k * E - 1)
      if #chunk < k * E then error({err = DAMAGED}) end
      for q = 0, k - 1 do
        ct[off + q * E] = unstamp(dec5(chunk, q * E + 1))
        cc[off + q * E] = dec5(chunk, q * E + 6)
      end
    end
    return ct[off], cc[off]
  end
  local q = pfrom[i] + j - stored[i]
  return pt[i][q], pc[i][q]
end

-- Takes band i's front entry off: its time and units.
local function pop(i)
  local t, tot = entry(i, 0)
  if stored[i] > 0 then
    head[i] = (head[i] + 1) % cap[i]
    stored[i] = stored[i] - 1
  else
    pfrom[i] = pfrom[i] + 1
  end
  len[i] = len[i] - 1
  local u = (tot - out[i]) % SPAN
  out[i] = tot
  if len[i] > 0 then front[i] = entry(i, 0) end
  touched[i] = true
  return t, u
end

-- Adds u units at time t to band i: merged into its back when both fall in one step, or
-- when it holds its most entries.
local function push(i, t, u)
  btot[i] = (btot[i] + u) % SPAN
  local l, s, p, c = len[i], step[i], pt[i], pc[i]
  if l > 0 and (t - t % s == back[i] - back[i] % s or l >= most[i]) then
    if stored[i] == l then
      -- the back is in the stored ring: it is rewritten from here
      stored[i] = l - 1
      p[#p + 1] = back[i]
    end
    p[#p], c[#p] = t, btot[i]
  else
    p[#p + 1], c[#p + 1] = t, btot[i]
    len[i] = l + 1
  end
  back[i] = t
  if len[i] == 1 then front[i] = t end
  touched[i] = true
end

-- Puts u units of time t into the first band from `from` whose window holds it at `at`.
local function place(from, t, u, at)
  if u <= 0 then return end
  for j = from, n do
    if t + W[j] > at then push(j, t, u) return end
  end
end

-- Reads the header fields of n_ bands from string s (1-based offset of the first), their
-- rings from offset `ring`; limit: the string's length when known.
local function read_bands(s, at, n_, ring, limit, into)
  local b = ring
  for i = 1, n_ do
    local f = {byte(s, at, at + 34)}
    if #f < 35 then error({err = DAMAGED}) end
    local function num(k)
      local o = 5 * k
      return (((f[o + 1] * 256 + f[o + 2]) * 256 + f[o + 3]) * 256 + f[o + 4]) * 256 + f[o + 5]
    end
    into.cap[i], into.head[i], into.len[i], into.out[i] = num(0), num(1), num(2), num(3)
    into.front[i], into.back[i], into.btot[i] = unstamp(num(4)), unstamp(num(5)), num(6)
    into.stored[i], into.base[i] = into.len[i], b
    if into.len[i] > into.cap[i] or (into.cap[i] > 0 and into.head[i] >= into.cap[i]) then
      error({err = DAMAGED})
    end
    b = b + into.cap[i] * E
    if limit and b > limit then error({err = DAMAGED}) end
    at = at + 35
  end
end
local this = {cap = cap, head = head, len = len, out = out, front = front, back = back,
  btot = btot, stored = stored, base = base}

local hdr = redis.call('GETRANGE', key, 0, H - 1)
local fresh = #hdr == 0
local guarded = #hdr > 12 and sub(hdr, 1, 12) == GUARD
if guarded and byte(hdr, 13) > VERSION then
  error({err = 'ratekeeper: the stored log was written by a newer release of ratekeeper (log format '
    .. byte(hdr, 13) .. ', this release reads ' .. VERSION .. '): upgrade this process'})
end
local fits = #hdr == H and guarded and byte(hdr, 13) == VERSION and byte(hdr, 14) == n
  and byte(hdr, 15) == flags and sub(hdr, FIXED + 1, FIXED + 5 * n) == WINDOWS

empty()
local rebuilt = nil
if fits then
  newest = dec5(hdr, 16) * 256 + byte(hdr, 21)
  expire_at = dec5(hdr, 22) * 256 + byte(hdr, 27)
  t0, m = newest, newest % SPAN
  read_bands(hdr, FIXED + 5 * n + 1, n, H, nil, this)
elseif not fresh then
  -- Written for other rules (or in the previous format): every unit still inside the
  -- longest window, put in the bands as a log of these rules holds them at its newest
  -- time; written even when the check is denied, so that it is rebuilt once.
  local all = redis.call('GET', key)
  if sub(all, 1, 12) == GUARD and #all > 12 then
    local n_old = byte(all, 14)
    newest = dec5(all, 16) * 256 + byte(all, 21)
    t0, m = newest, newest % SPAN
    local old = {cap = {}, head = {}, len = {}, out = {}, front = {}, back = {}, btot = {},
      stored = {}, base = {}}
    read_bands(all, FIXED + 5 * n_old + 1, n_old, FIXED + 40 * n_old, #all, old)
    for k = n_old, 1, -1 do
      local prev = old.out[k]
      for j = 0, old.len[k] - 1 do
        local off = old.base[k] + ((old.head[k] + j) % old.cap[k]) * E + 1
        local t, tot = unstamp(dec5(all, off)), dec5(all, off + 5)
        local u = (tot - prev) % SPAN
        prev = tot
        if t > newest - longest then place(1, t, u, newest) end
      end
    end
  elseif #all >= 29 and byte(all, 1) == 4 then
    -- the previous format: a ring of 5-byte timestamps, one per unit
    local old_h = 29 + 15 * byte(all, 2)
    local old_n, old_cap = dec5(all, 3), dec5(all, 8)
    if old_cap == 0 and old_n > 0 then error({err = DAMAGED}) end
    newest = dec5(all, 18) * 256 + byte(all, 23)
    t0, m = newest, newest % SPAN
    local run_t, run = nil, 0
    for s = max(0, old_n - old_cap), old_n - 1 do
      local t = unstamp(dec5(all, old_h + (s % old_cap) * 5 + 1))
      if t > newest - longest then
        if t == run_t then
          run = run + 1
        else
          if run_t then place(1, run_t, run, newest) end
          run_t, run = t, 1
        end
      end
    end
    if run_t then place(1, run_t, run, newest) end
  end
  rebuilt = {}
  for _, f in ipairs({cap, head, len, out, front, back, btot, stored, base, pfrom, touched}) do
    local copy = {}
    for i = 1, n do copy[i] = f[i] end
    rebuilt[#rebuilt + 1] = copy
  end
  local p, c = {}, {}
  for i = 1, n do
    p[i], c[i] = {}, {}
    for q = 1, #pt[i] do p[i][q], c[i][q] = pt[i][q], pc[i][q] end
  end
  rebuilt[#rebuilt + 1], rebuilt[#rebuilt + 2] = p, c
end

-- One key's clock never runs backwards: a check older than the newest entry is taken at
-- its time. After a jump of over 17 years every entry is out of every window (and its
-- stored time would be ambiguous): start afresh.
if now < newest then now = newest end
local jumped = now - newest >= SPAN / 2
if jumped then empty() end

-- Entries that left a window move to the next band whose window still holds them, the
-- longest window's band first (so a band is emptied of what left it before it is given
-- more); a band whose newest entry left every window is let go at once.
for i = n, 1, -1 do
  if len[i] > 0 and back[i] + W[n] <= now then
    if cap[i] > 0 then head[i] = (head[i] + stored[i]) % cap[i] end
    stored[i], pfrom[i], len[i], out[i], touched[i] = 0, #pt[i] + 1, 0, btot[i], true
  else
    while len[i] > 0 and front[i] + W[i] <= now do
      local t, u = pop(i)
      place(i + 1, t, u, now)
    end
  end
end

-- Each rule's window holds its band and every shorter one's.
local result = {now, 1, 0, detail, 0}
local allowed = 1
local count, oldest = 0, -1
for i = 1, n do
  count = count + (btot[i] - out[i]) % SPAN
  if len[i] > 0 then oldest = front[i] end
  result[3 * i + 3] = count
  result[3 * i + 4] = count > 0 and oldest or -1
  result[3 * i + 5] = -1
  if count + cost > limits[i] then allowed = 0 end
end
if allowed == 0 then
  result[2] = 0
  -- when each rule would take this check: once the units over its limit have left its
  -- window, its oldest band's first (a binary search of each band's running totals)
  for i = 1, n do
    local need = result[3 * i + 3] + cost - limits[i]
    if need > 0 and cost <= limits[i] then
      for k = i, 1, -1 do
        local units = (btot[k] - out[k]) % SPAN
        if need <= units then
          local a, b = 0, len[k] - 1
          while a < b do
            local mid = floor((a + b) / 2)
            local _, tot = entry(k, mid)
            if (tot - out[k]) % SPAN >= need then b = mid else a = mid + 1 end
          end
          local t = a == len[k] - 1 and back[k] or entry(k, a)
          result[3 * i + 5] = t + windows[i]
          break
        end
        need = need - units
      end
    end
  end
end

-- A denied check writes nothing but a rebuilt log (as of its newest entry: a later check
-- may be earlier than this one, though never than that entry, and entries only move to
-- longer windows' bands).
if not writing or (allowed == 0 and not rebuilt) then return result end
if allowed == 0 then
  cap, head, len, out, front, back, btot, stored, base, pfrom, touched, pt, pc = unpack(rebuilt)
else
  push(1, now, cost)
  newest = now
end

-- The key must outlive its newest entry by the longest window. The TTL is a quarter
-- more than that, so on the Redis clock it needs renewing only every quarter window,
-- and at least a second, so that a log of millisecond windows outlives the round
-- trips between its checks.
local TTL = max(longest + floor(longest / 4), 1000)
local rewrite = not fits or jumped
for i = 1, n do
  if len[i] > cap[i] then rewrite = true end
end
local renew = allowed == 1 and not (clock and clock + longest <= expire_at)
if renew or rewrite then expire_at = clock and clock + TTL or 0 end

local function put(parts, t, tot)
  parts[#parts + 1] = enc5(t % SPAN) .. enc5(tot)
end

local ring = nil
if rewrite then
  -- The whole string: every ring from its first slot, a ring that outgrew its capacity
  -- at twice it (at least 4, at most its most).
  ring = {}
  local caps = {}
  for i = 1, n do
    caps[i] = len[i] > cap[i] and min(most[i], max(len[i], 2 * cap[i], 4)) or cap[i]
    for j = 0, len[i] - 1 do put(ring, entry(i, j)) end
    ring[#ring + 1] = rep('\0', (caps[i] - len[i]) * E)
  end
  for i = 1, n do cap[i], head[i], touched[i] = caps[i], 0, true end
end

-- The header: a band this check left alone keeps its stored bytes.
local parts = {GUARD, char(VERSION, n, flags), enc5(floor(newest / 256)), char(newest % 256),
  enc5(floor(expire_at / 256)), char(expire_at % 256), WINDOWS}
for i = 1, n do
  if touched[i] or not fits then
    parts[#parts + 1] = enc5(cap[i]) .. enc5(head[i]) .. enc5(len[i]) .. enc5(out[i])
      .. enc5(front[i] % SPAN) .. enc5(back[i] % SPAN) .. enc5(btot[i])
  else
    local at = FIXED + 5 * n + 35 * i - 34
    parts[#parts + 1] = sub(hdr, at, at + 34)
  end
end
local header = table.concat(parts)

if ring then
  redis.call('SET', key, header .. table.concat(ring), 'PX', TTL)
  return result
end
for i = 1, n do
  local added = #pt[i] - pfrom[i] + 1
  if added > 0 then
    local slot = (head[i] + stored[i]) % cap[i]
    local first = min(added, cap[i] - slot)
    if base[i] + (slot + first) * E > 536870912 then error({err = DAMAGED}) end
    local bytes = {}
    for q = pfrom[i], pfrom[i] + first - 1 do put(bytes, pt[i][q], pc[i][q]) end
    redis.call('SETRANGE', key, base[i] + slot * E, table.concat(bytes))
    if added > first then
      bytes = {}
      for q = pfrom[i] + first, #pt[i] do put(bytes, pt[i][q], pc[i][q]) end
      redis.call('SETRANGE', key, base[i], table.concat(bytes))
    end
  end
end
redis.call('SETRANGE', key, 0, header)
if renew then redis.call('PEXPIRE', key, TTL) end
return result
