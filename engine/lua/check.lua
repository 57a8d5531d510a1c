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

-- Each rule's band (see the engine's docs): its window W, step and most entries, then its
-- header's fields: cap, head, len, out (the running total before its front), front and
-- back (their times), btot (the back's running total); stored, how many of its entries
-- (from the front) are read from the stored ring at base; pt/pc, the entries this check
-- added (times, totals) from pfrom (made when first needed); touched, whether it changed.
-- (Tables and functions are made afresh on every run of a script and cost more than the
-- work they hold: there are few of each, made with room for four rules, which a table
-- grown one index at a time would reallocate three times; a band's fields are read in
-- line.)
local W = windows
local cap, head, len, out = {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}
local front, back, btot = {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}
local stored, base, pfrom = {0, 0, 0, 0}, {0, 0, 0, 0}, {1, 1, 1, 1}
local touched, pt, pc = {false, false, false, false}, {}, {}
for i = 5, n do
  cap[i], head[i], len[i], out[i], front[i], back[i], btot[i] = 0, 0, 0, 0, 0, 0, 0
  stored[i], base[i], pfrom[i], touched[i] = 0, 0, 1, false
end
-- Band i's step, and its most entries.
local function step(i)
  return exact and 1 or max(1, math.ceil(W[i] / 1024))
end
local function most(i)
  return max(1, min(floor((W[i] - (i > 1 and W[i - 1] or 0)) / step(i)) + 2, 131072))
end

local newest, expire_at = 0, 0
-- the stored log's newest time (and it modulo 2^40), which its stamps are read back against
local t0, m = 0, 0

-- Entry j (from 0, its front) of band i: (time, running total), from the stored ring
-- (the next 32 entries read at once, each decoded when asked for) or from what this
-- check added.
local chunk, chunk_at = '', 0
local function entry(i, j)
  if j < stored[i] then
    local slot = (head[i] + j) % cap[i]
    local off = base[i] + slot * E
    local at = off - chunk_at
    if at < 0 or at + E > #chunk then
      local k = min(32, cap[i] - slot, stored[i] - j)
      chunk, chunk_at, at = redis.call('GETRANGE', key, off, off + k * E - 1), off, 0
      if #chunk < E then error({err = DAMAGED}) end
    end
    local a, b, c, d, e, f, g, h, u, v = byte(chunk, at + 1, at + 10)
    return t0 - (m - ((((a * 256 + b) * 256 + c) * 256 + d) * 256 + e)) % SPAN,
      (((f * 256 + g) * 256 + h) * 256 + u) * 256 + v
  end
  local q = pfrom[i] + j - stored[i]
  return pt[i][q], pc[i][q]
end

-- Adds u units at time t to band i: merged into its back when both fall in one step, or
-- when it holds its most entries.
local function push(i, t, u)
  btot[i] = (btot[i] + u) % SPAN
  local l, s, p, c = len[i], step(i), pt[i], pc[i]
  if not p then p, c = {}, {}; pt[i], pc[i] = p, c end
  if l > 0 and (t - t % s == back[i] - back[i] % s or l >= most(i)) then
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

local hdr = redis.call('GETRANGE', key, 0, H - 1)
local fresh = #hdr == 0
local guarded = #hdr > 12 and sub(hdr, 1, 12) == GUARD
if guarded and byte(hdr, 13) > VERSION then
  error({err = 'ratekeeper: the stored log was written by a newer release of ratekeeper (log format '
    .. byte(hdr, 13) .. ', this release reads ' .. VERSION .. '): upgrade this process'})
end
local fits = #hdr == H and guarded and byte(hdr, 13) == VERSION and byte(hdr, 14) == n
  and byte(hdr, 15) == flags and sub(hdr, FIXED + 1, FIXED + 5 * n) == WINDOWS

local rebuilt = nil
-- what the stored header held (a band's head, len, out, front and back stamps, btot; the
-- expiry), so that a patch encodes again only what changed
local held, expire_in = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, -1
if fits then
  newest = dec5(hdr, 16) * 256 + byte(hdr, 21)
  expire_at = dec5(hdr, 22) * 256 + byte(hdr, 27)
  expire_in = expire_at
  t0, m = newest, newest % SPAN
  local ring = H
  for i = 1, n do
    local at = FIXED + 5 * n + 35 * i - 34
    local c1, c2, c3, c4, c5, h1, h2, h3, h4, h5, l1, l2, l3, l4, l5, o1, o2, o3, o4, o5 =
      byte(hdr, at, at + 19)
    local f1, f2, f3, f4, f5, b1, b2, b3, b4, b5, s1, s2, s3, s4, s5 = byte(hdr, at + 20, at + 34)
    cap[i] = (((c1 * 256 + c2) * 256 + c3) * 256 + c4) * 256 + c5
    head[i] = (((h1 * 256 + h2) * 256 + h3) * 256 + h4) * 256 + h5
    len[i] = (((l1 * 256 + l2) * 256 + l3) * 256 + l4) * 256 + l5
    out[i] = (((o1 * 256 + o2) * 256 + o3) * 256 + o4) * 256 + o5
    local fs = (((f1 * 256 + f2) * 256 + f3) * 256 + f4) * 256 + f5
    local bs = (((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5
    front[i], back[i] = t0 - (m - fs) % SPAN, t0 - (m - bs) % SPAN
    btot[i] = (((s1 * 256 + s2) * 256 + s3) * 256 + s4) * 256 + s5
    local k = 6 * i - 6
    held[k + 1], held[k + 2], held[k + 3] = head[i], len[i], out[i]
    held[k + 4], held[k + 5], held[k + 6] = fs, bs, btot[i]
    if len[i] > cap[i] or (cap[i] > 0 and head[i] >= cap[i]) then error({err = DAMAGED}) end
    stored[i], base[i] = len[i], ring
    ring = ring + cap[i] * E
  end
elseif not fresh then
  -- Written for other rules (or in the previous format): every unit still inside the
  -- longest window, put in the bands as a log of these rules holds them at its newest
  -- time; written even when the check is denied, so that it is rebuilt once.
  local all = redis.call('GET', key)
  local function place(t, u)
    if u > 0 and t > newest - longest then
      for j = 1, n do
        if t + W[j] > newest then push(j, t, u) return end
      end
    end
  end
  if sub(all, 1, 12) == GUARD and #all > 12 then
    local n_old = byte(all, 14)
    newest = dec5(all, 16) * 256 + byte(all, 21)
    t0, m = newest, newest % SPAN
    local ring = FIXED + 40 * n_old
    local bands = {}
    for k = 1, n_old do
      local at = FIXED + 5 * n_old + 35 * k - 34
      local c, h, l, o = dec5(all, at), dec5(all, at + 5), dec5(all, at + 10), dec5(all, at + 15)
      if l > c or (c > 0 and h >= c) or ring + c * E > #all then error({err = DAMAGED}) end
      bands[k] = {c, h, l, o, ring}
      ring = ring + c * E
    end
    -- the oldest band first, each from its front
    for k = n_old, 1, -1 do
      local c, h, l, prev, ring_at = unpack(bands[k])
      for j = 0, l - 1 do
        local off = ring_at + ((h + j) % c) * E + 1
        local t, tot = t0 - (m - dec5(all, off)) % SPAN, dec5(all, off + 5)
        place(t, (tot - prev) % SPAN)
        prev = tot
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
      local t = t0 - (m - dec5(all, old_h + (s % old_cap) * 5 + 1)) % SPAN
      if t == run_t then
        run = run + 1
      else
        if run_t then place(run_t, run) end
        run_t, run = t, 1
      end
    end
    if run_t then place(run_t, run) end
  end
  local function copy(f)
    local c = {}
    for i = 1, n do c[i] = f[i] end
    return c
  end
  rebuilt = {copy(cap), copy(head), copy(len), copy(out), copy(front), copy(back), copy(btot),
    copy(stored), copy(base), copy(pfrom), copy(touched), {}, {}}
  for i = 1, n do
    if pt[i] then
      local p, c = {}, {}
      for q = 1, #pt[i] do p[q], c[q] = pt[i][q], pc[i][q] end
      rebuilt[12][i], rebuilt[13][i] = p, c
    end
  end
end

-- One key's clock never runs backwards: a check older than the newest entry is taken at
-- its time. After a jump of over 17 years every entry is out of every window (and its
-- stored time would be ambiguous): start afresh.
if now < newest then now = newest end
local jumped = now - newest >= SPAN / 2
if jumped then
  for i = 1, n do
    cap[i], head[i], len[i], out[i], front[i], back[i], btot[i] = 0, 0, 0, 0, 0, 0, 0
    stored[i], base[i], pt[i], pc[i], pfrom[i], touched[i] = 0, 0, nil, nil, 1, false
  end
end

-- Entries that left a window move to the next band whose window still holds them, the
-- longest window's band first (so a band is emptied of what left it before it is given
-- more); a band whose newest entry left every window is let go at once.
for i = n, 1, -1 do
  if len[i] > 0 and back[i] + W[n] <= now then
    if cap[i] > 0 then head[i] = (head[i] + stored[i]) % cap[i] end
    stored[i], len[i], out[i], touched[i] = 0, 0, btot[i], true
    pfrom[i] = pt[i] and #pt[i] + 1 or 1
  else
    local w = W[i]
    while len[i] > 0 and front[i] + w <= now do
      -- the front entry leaves
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
      if u > 0 then
        for j = i + 1, n do
          if t + W[j] > now then push(j, t, u) break end
        end
      end
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
  -- window, its oldest band's first (the first entry whose running total reaches them:
  -- galloping from the front, entries 0, 1, 3, 7, ..., then a binary search)
  for i = 1, n do
    local need = result[3 * i + 3] + cost - limits[i]
    if need > 0 and cost <= limits[i] then
      for k = i, 1, -1 do
        local units = (btot[k] - out[k]) % SPAN
        if need <= units then
          local last = len[k] - 1
          local a, b = 0, 0
          while b < last do
            local _, tot = entry(k, b)
            if (tot - out[k]) % SPAN >= need then break end
            a, b = b + 1, min(2 * b + 1, last)
          end
          while a < b do
            local mid = floor((a + b) / 2)
            local _, tot = entry(k, mid)
            if (tot - out[k]) % SPAN >= need then b = mid else a = mid + 1 end
          end
          local t = a == last and back[k] or entry(k, a)
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

local ring = nil
if rewrite then
  -- The whole string: every ring from its first slot, a ring that outgrew its capacity
  -- at twice it (at least 4, at most its most).
  ring = {}
  local caps = {}
  for i = 1, n do
    caps[i] = len[i] > cap[i] and min(most(i), max(len[i], 2 * cap[i], 4)) or cap[i]
    for j = 0, len[i] - 1 do
      local t, tot = entry(i, j)
      ring[#ring + 1] = enc5(t % SPAN) .. enc5(tot)
    end
    ring[#ring + 1] = rep('\0', (caps[i] - len[i]) * E)
  end
  for i = 1, n do cap[i], head[i], touched[i] = caps[i], 0, true end
end

-- The header: a band this check left alone keeps its stored bytes.
local parts = {GUARD, char(VERSION, n, flags), enc5(floor(newest / 256)), char(newest % 256),
  expire_at == expire_in and sub(hdr, 22, 27) or enc5(floor(expire_at / 256)) .. char(expire_at % 256),
  WINDOWS}
for i = 1, n do
  local at = FIXED + 5 * n + 35 * i - 34
  if not fits or ring then
    parts[#parts + 1] = enc5(cap[i]) .. enc5(head[i]) .. enc5(len[i]) .. enc5(out[i])
      .. enc5(front[i] % SPAN) .. enc5(back[i] % SPAN) .. enc5(btot[i])
  elseif touched[i] then
    -- what changed, encoded again (a patch never changes a ring's capacity)
    local k, f, b = 6 * i - 6, front[i] % SPAN, back[i] % SPAN
    parts[#parts + 1] = sub(hdr, at, at + 4)
      .. (head[i] == held[k + 1] and sub(hdr, at + 5, at + 9) or enc5(head[i]))
      .. (len[i] == held[k + 2] and sub(hdr, at + 10, at + 14) or enc5(len[i]))
      .. (out[i] == held[k + 3] and sub(hdr, at + 15, at + 19) or enc5(out[i]))
      .. (f == held[k + 4] and sub(hdr, at + 20, at + 24) or enc5(f))
      .. (b == held[k + 5] and sub(hdr, at + 25, at + 29) or enc5(b))
      .. (btot[i] == held[k + 6] and sub(hdr, at + 30, at + 34) or enc5(btot[i]))
  else
    parts[#parts + 1] = sub(hdr, at, at + 34)
  end
end
local header = table.concat(parts)

if ring then
  redis.call('SET', key, header .. table.concat(ring), 'PX', TTL)
  return result
end
-- Each band's added entries, from its slot after the stored ones (two ranges where the
-- ring wraps).
for i = 1, n do
  local p, c = pt[i], pc[i]
  local added = p and #p - pfrom[i] + 1 or 0
  if added > 0 then
    local slot = (head[i] + stored[i]) % cap[i]
    local first = min(added, cap[i] - slot)
    if base[i] + (slot + first) * E > 536870912 then error({err = DAMAGED}) end
    local bytes, from = {}, base[i] + slot * E
    for q = pfrom[i], #p do
      if q == pfrom[i] + first then
        redis.call('SETRANGE', key, from, table.concat(bytes))
        bytes, from = {}, base[i]
      end
      bytes[#bytes + 1] = enc5(p[q] % SPAN) .. enc5(c[q])
    end
    redis.call('SETRANGE', key, from, table.concat(bytes))
  end
end
redis.call('SETRANGE', key, 0, header)
if renew then redis.call('PEXPIRE', key, TTL) end
return result
