-- ratekeeper: one check (or peek) of one key against a whole rule set, atomically.
--
-- KEYS[1]  the key's log: one string, a header then each rule's ring of entries
-- KEYS[2]  (optional) the key's record, a hash: s and b, a safelist and a
--          blocklist entry ("<until ms> <reason>"); t, a tier; o, an override
--          ("<limit>:<window ms>;..." shortest window first)
-- KEYS[3]  (optional, with KEYS[2]) the record of the bans the key earned in the
--          check's scope: b, a blocklist entry judged after KEYS[2]'s s and b
-- ARGV[1]  "c" to check (log `cost` units on admission), "p" to peek (never write), "s"
--          to settle a reservation (engine/src/log.rs, `Settle`); "cx", "px", "sx": the
--          same, keeping every entry (never merging close ones)
-- ARGV[2]  cost; to settle, "<charged> <at> <refund>": the units charged over the
--          estimate (logged whatever the limits say), the time the reservation was
--          logged at, the units it gives back
-- ARGV[3]  now in ms, or "" to use the Redis server clock (TIME)
-- ARGV[4]  n, the number of the caller's rules
-- ARGV[5]  the rules' windows as the header stores them (5 bytes each)
-- ARGV[6 .. 5+n]  the limit of each rule, then ARGV[6+n .. 5+2n] its window (ms),
--          shortest window first
-- ARGV[6+2n ..]  the tiers a stored tier may select, each: name, k, windows, k limits,
--          k windows
--
-- Returns {now, allowed (0/1), kind, detail, until, then per rule: units in the window
--          before this check, its oldest entry's time (-1: none), time the check would
--          fit (-1: n/a)}. kind 0: the rules decided, detail says which ("" the caller's,
--          "t<name>" a stored tier, "o<rules>" the override); kind 1 (safelisted, allowed)
--          and 2 (blocked, denied): no rule was consulted, detail is the reason, until
--          when the entry lapses.
--
-- The log's layout and rules are described once, in the engine crate's docs
-- (engine/src/lib.rs). This script is the engine's Lua twin (engine/src/log.rs) for
-- Redis servers without the module; core/tests/integration/engine_differential.rs holds
-- the two to equal replies and stored bytes. The common path makes four Redis calls
-- (TIME, HMGET of the key's record, a GETRANGE of the header and the first band's
-- first entries, a SETRANGE of the header and the new entry), plus a write to each band
-- an entry moved into and a read every 32 entries that leave a band; the header is read
-- and written with `struct` (built into Redis's Lua), in one call each.

local byte, char, sub, rep, floor = string.byte, string.char, string.sub, string.rep, math.floor
local pack, unpack5 = struct.pack, struct.unpack
local min, max, ceil = math.min, math.max, math.ceil

local key = KEYS[1]
local mode = sub(ARGV[1], 1, 1)
local settle = mode == 's'
local writing = mode == 'c' or settle
local exact = sub(ARGV[1], 2, 2) == 'x'
local cost, settle_at, refund = tonumber(ARGV[2]), 0, 0
if settle then
  local c, a, r = string.match(ARGV[2], '^(%d+) (%d+) (%d+)$')
  cost, settle_at, refund = tonumber(c), tonumber(a), tonumber(r)
end
local now = tonumber(ARGV[3])
-- the Redis clock, when this check runs on it (TTLs always do)
local clock = nil
if not now then
  local t = redis.call('TIME')
  now = t[1] * 1000 + floor(t[2] / 1000)
  clock = now
end

local DAMAGED = 'ratekeeper: the stored log is damaged (its bytes do not hold what its header says)'

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
    parts[n] = pack('>I5', windows[n])
  end
  WINDOWS = table.concat(parts)
else
  -- the windows from their stored form (one call; the one after the last is unused)
  windows = {unpack5('>' .. rep('I5', n), WINDOWS)}
  for i = 1, n do limits[i] = ARGV[first + i - 1] + 0 end
end
-- (windows come shortest first)
local longest = n > 0 and windows[n] or 0

local VERSION = 5
local GUARD = '\4\0\255\255\255\255\255\128\0\0\0\0'
local E = 10                      -- bytes per entry: its time's stamp, its band's running total
local FIXED = 27
local H = FIXED + 40 * n
local SPAN = 1099511627776        -- 2^40: the range of a stored time and of a running total
local flags = exact and 1 or 0
local BANDS = '>' .. rep('I5', 7 * n)
local ENTRY = '>I5I5'
-- (a stored time or total is its value modulo 2^40: struct.pack writes its low bytes)

-- Each rule's band (see the engine's docs). F holds band i's header fields from k = 7i:
-- F[k-6] cap, F[k-5] head, F[k-4] len, F[k-3] out (the running total before its front),
-- F[k-2] front and F[k-1] back (their times), F[k] btot (the back's running total); and
-- G from x = 3i: G[x-2] stored, how many of its entries (from the front) are read from
-- the stored ring, G[x-1] base, where that ring starts, G[x] from, the first of A[i]'s
-- entries still in the band. A[i] holds the entries this check added to band i, each a
-- time then a running total (made when first needed).
-- (Tables and functions are made afresh on every run of a script and cost more than the
-- work they hold: the fields are kept in one table, the header's read in one call.)
local W = windows
local X = 7 * n
local F, G, A = nil, nil, {}

local newest, expire_at = 0, 0
-- the stored log's newest time (and it modulo 2^40), which its stamps are read back against
local t0, m = 0, 0

-- Entry j (from 0, its front) of band i: (time, running total), from the stored ring
-- (the next 32 entries read at once) or from what this check added.
local chunk, chunk_at = '', 0
local function entry(i, j)
  local x = 3 * i
  local st = G[x - 2]
  if j < st then
    local k = 7 * i
    local c = F[k - 6]
    local slot = (F[k - 5] + j) % c
    local off = G[x - 1] + slot * E
    local at = off - chunk_at
    if at < 0 or at + E > #chunk then
      chunk, chunk_at, at = redis.call('GETRANGE', key, off, off + min(32, c - slot, st - j) * E - 1), off, 0
      if #chunk < E then error({err = DAMAGED}) end
    end
    local s, tot = unpack5(ENTRY, chunk, at + 1)
    return t0 - (m - s) % SPAN, tot
  end
  local q, a = 2 * (G[x] + j - st), A[i]
  return a[q - 1], a[q]
end

-- Adds u units at time t to band i: merged into its back when both fall in one step (a
-- 1024th of its window, 1 ms when keeping every entry) or when it holds its most entries.
local grows = false
local function push(i, t, u)
  local k = 7 * i
  local tot = (F[k] + u) % SPAN
  F[k] = tot
  local l, b, a = F[k - 4], F[k - 1], A[i]
  if not a then a = {}; A[i] = a end
  local s = 1
  if not exact then s = ceil(W[i] / 1024) end
  -- (l >= its most entries, min(floor(span / s) + 2, 131072), in fewer steps)
  if l > 0 and (t - t % s == b - b % s
      or l >= 131072 or W[i] - (i > 1 and W[i - 1] or 0) < (l - 1) * s) then
    local x = 3 * i
    if G[x - 2] == l then
      -- the back is in the stored ring: it is rewritten from here
      G[x - 2] = l - 1
      a[#a + 1] = b
      a[#a + 1] = 0
    end
    a[#a - 1], a[#a] = t, tot
  else
    a[#a + 1] = t
    a[#a + 1] = tot
    F[k - 4] = l + 1
    if l == F[k - 6] then grows = true end
  end
  F[k - 1] = t
  if F[k - 4] == 1 then F[k - 2] = t end
end

-- the header, and the first band's ring's first 32 entries (which follow it) in one read
local hdr = redis.call('GETRANGE', key, 0, H + 32 * E - 1)
local fresh = #hdr == 0
local guarded = #hdr > 12 and sub(hdr, 1, 12) == GUARD
if guarded and byte(hdr, 13) > VERSION then
  error({err = 'ratekeeper: the stored log was written by a newer release of ratekeeper (log format '
    .. byte(hdr, 13) .. ', this release reads ' .. VERSION .. '): upgrade this process'})
end
local fits = #hdr >= H and guarded and byte(hdr, 13) == VERSION and byte(hdr, 14) == n
  and byte(hdr, 15) == flags and sub(hdr, FIXED + 1, FIXED + 5 * n) == WINDOWS

-- An empty log of these rules: its F and G.
local function empty()
  local f, g = {}, {}
  for k = 1, X do f[k] = 0 end
  for i = 1, n do g[3 * i - 2], g[3 * i - 1], g[3 * i] = 0, 0, 1 end
  return f, g
end

-- The bands as the read changed them, as of the log's newest entry (a log written for
-- other rules rebuilt, or a settle's refund given back): written even when the check is
-- denied or the settle logs nothing new, so that a log is rebuilt once.
local rebuilt, changed = nil, false
if fits then
  newest, expire_at = unpack5('>I6I6', hdr, 16)
  t0, m = newest, newest % SPAN
  F = {unpack5(BANDS, hdr, FIXED + 5 * n + 1)}
  chunk = hdr
  G = {0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1}
  local ring = H
  for i = 1, n do
    local k, x = 7 * i, 3 * i
    local c, l = F[k - 6], F[k - 4]
    if l > c or (c > 0 and F[k - 5] >= c) then error({err = DAMAGED}) end
    if l > 0 then F[k - 2], F[k - 1] = t0 - (m - F[k - 2]) % SPAN, t0 - (m - F[k - 1]) % SPAN end
    G[x - 2], G[x - 1], G[x] = l, ring, 1
    ring = ring + c * E
  end
  -- A settle gives its refund back in place: up to `refund` units of the first entry
  -- (oldest first) from its time on, in the oldest band whose back is from then on; that
  -- entry and the newer ones of its band are rewritten (as added ones), their running
  -- totals less what it gave, and it is taken out when it is left with none.
  if settle and refund > 0 and settle_at > newest - longest then
    for i = n, 1, -1 do
      local k, x = 7 * i, 3 * i
      local l = F[k - 4]
      if l > 0 and F[k - 1] >= settle_at then
        local j = 0
        if F[k - 2] < settle_at then
          -- entry `older` is older than the settle's time, entry j is not; a reservation
          -- is most often settled soon, its entry among the newest: galloping from the
          -- back (entries l - 2, l - 3, l - 5, ...), then a binary search of what is left
          local older, step = 0, 1
          j = l - 1
          while j - step > older do
            local probe = j - step
            if entry(i, probe) >= settle_at then
              j, step = probe, 2 * step
            else
              older = probe
              break
            end
          end
          while j - older > 1 do
            local mid = floor((older + j) / 2)
            if entry(i, mid) >= settle_at then j = mid else older = mid end
          end
        end
        local before = F[k - 3]
        if j > 0 then
          local _, tot = entry(i, j - 1)
          before = tot
        end
        local _, tot = entry(i, j)
        local units = (tot - before) % SPAN
        local given = min(refund, units)
        if given > 0 then
          local a = {}
          for q = j, l - 1 do
            local t, total = entry(i, q)
            if q > j or given < units then
              a[#a + 1] = t
              a[#a + 1] = (total - given) % SPAN
            end
          end
          G[x - 2], G[x] = j, 1
          A[i] = a
          l = j + #a / 2
          F[k - 4] = l
          F[k] = (F[k] - given) % SPAN
          if l > 0 then
            if j == 0 then F[k - 2] = entry(i, 0) end
            F[k - 1] = entry(i, l - 1)
          end
          changed = true
        end
        break
      end
    end
  end
else
  F, G = empty()
end
if not fits and not fresh then
  -- Written for other rules (or in the previous format): every unit still inside the
  -- longest window, put in the bands as a log of these rules holds them at its newest
  -- time; written even when the check is denied, so that it is rebuilt once.
  local all = redis.call('GET', key)
  -- a settle's refund: from the first entry (oldest first) from its time on, once;
  -- nothing when the reservation left every window
  local function taken(t, u)
    if refund == 0 or t < settle_at then return u end
    local r = refund
    refund = 0
    if settle_at <= newest - longest then return u end
    return u - min(r, u)
  end
  local function place(t, u)
    if t > newest - longest then
      u = taken(t, u)
      if u > 0 then
        for j = 1, n do
          if t + W[j] > newest then push(j, t, u) return end
        end
      end
    end
  end
  local function dec5(s, at)
    if at + 4 > #s then error({err = DAMAGED}) end
    return (unpack5('>I5', s, at))
  end
  if sub(all, 1, 12) == GUARD and #all > 12 then
    local n_old = byte(all, 14)
    if #all < 21 then error({err = DAMAGED}) end
    newest = unpack5('>I6', all, 16)
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
        local stamp, tot = unpack5(ENTRY, all, ring_at + ((h + j) % c) * E + 1)
        place(t0 - (m - stamp) % SPAN, (tot - prev) % SPAN)
        prev = tot
      end
    end
  elseif #all >= 29 and byte(all, 1) == 4 then
    -- the previous format: a ring of 5-byte timestamps, one per unit
    local old_h = 29 + 15 * byte(all, 2)
    local old_n, old_cap = dec5(all, 3), dec5(all, 8)
    if old_cap == 0 and old_n > 0 then error({err = DAMAGED}) end
    newest = unpack5('>I6', all, 18)
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
  changed = true
end
-- The rebuilt log keeps the bands as read: `keep` copies them before the advance first
-- changes them (most checks advance nothing, and copy nothing).
local keep = nil
if changed then
  rebuilt = {F, G, A}
  keep = function()
    keep = nil
    local f, g, a = {}, {}, {}
    for k = 1, X do f[k] = F[k] end
    for k = 1, 3 * n do g[k] = G[k] end
    for i = 1, n do
      if A[i] then
        local c = {}
        for q = 1, #A[i] do c[q] = A[i][q] end
        a[i] = c
      end
    end
    rebuilt = {f, g, a}
  end
end

-- One key's clock never runs backwards: a check older than the newest entry is taken at
-- its time. After a jump of over 17 years every entry is out of every window (and its
-- stored time would be ambiguous): start afresh.
if now < newest then now = newest end
local jumped = now - newest >= SPAN / 2
if jumped then
  F, G = empty()
  A = {}
  keep = nil
end

-- Entries that left a window move to the next band whose window still holds them, the
-- longest window's band first (so a band is emptied of what left it before it is given
-- more); a band whose newest entry left every window is let go at once.
for i = n, 1, -1 do
  local k, x = 7 * i, 3 * i
  if F[k - 4] > 0 and F[k - 1] + longest <= now then
    if keep then keep() end
    local c = F[k - 6]
    if c > 0 then F[k - 5] = (F[k - 5] + G[x - 2]) % c end
    G[x - 2], F[k - 4], F[k - 3] = 0, 0, F[k]
    G[x] = A[i] and #A[i] / 2 + 1 or 1
  else
    local w = W[i]
    while F[k - 4] > 0 and F[k - 2] + w <= now do
      -- the front entry leaves
      if keep then keep() end
      local t, tot = entry(i, 0)
      local st = G[x - 2]
      if st > 0 then
        F[k - 5] = (F[k - 5] + 1) % F[k - 6]
        G[x - 2] = st - 1
      else
        G[x] = G[x] + 1
      end
      local l = F[k - 4] - 1
      F[k - 4] = l
      local u = (tot - F[k - 3]) % SPAN
      F[k - 3] = tot
      if l > 0 then F[k - 2] = entry(i, 0) end
      if u > 0 then
        for j = i + 1, n do
          if t + W[j] > now then push(j, t, u) break end
        end
      end
    end
  end
end

-- Each rule's window holds its band and every shorter one's.
local result = {now, 1, 0, detail, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
for j = 6 + 3 * n, 17 do result[j] = nil end
local allowed = 1
local count, oldest = 0, -1
for i = 1, n do
  local k = 7 * i
  count = count + (F[k] - F[k - 3]) % SPAN
  if F[k - 4] > 0 then oldest = F[k - 2] end
  result[3 * i + 3] = count
  result[3 * i + 4] = count > 0 and oldest or -1
  result[3 * i + 5] = -1
  if count + cost > limits[i] then allowed = 0 end
end
-- a settle's overrun is counted, never refused: up to the units that fill the log to the
-- largest limit (its longest window holds every entry), past which every check is
-- denied anyway and a running total would wrap
if settle then
  allowed = 1
  cost = max(min(cost, SPAN - 1 - count), 0)
end
if allowed == 0 then
  result[2] = 0
  -- when each rule would take this check: once the units over its limit have left its
  -- window, its oldest band's first (the first entry whose running total reaches them:
  -- galloping from the front, entries 0, 1, 3, 7, ..., then a binary search)
  for i = 1, n do
    local need = result[3 * i + 3] + cost - limits[i]
    if need > 0 and cost <= limits[i] then
      for b = i, 1, -1 do
        local k = 7 * b
        local o = F[k - 3]
        local units = (F[k] - o) % SPAN
        if need <= units then
          local last = F[k - 4] - 1
          local lo, hi = 0, 0
          while hi < last do
            local _, tot = entry(b, hi)
            if (tot - o) % SPAN >= need then break end
            lo, hi = hi + 1, min(2 * hi + 1, last)
          end
          while lo < hi do
            local mid = floor((lo + hi) / 2)
            local _, tot = entry(b, mid)
            if (tot - o) % SPAN >= need then hi = mid else lo = mid + 1 end
          end
          local t = lo == last and F[k - 1] or entry(b, lo)
          result[3 * i + 5] = t + windows[i]
          break
        end
        need = need - units
      end
    end
  end
end

-- A denied check writes nothing but a log the read changed (as of its newest entry: a
-- later check may be earlier than this one, though never than that entry, and entries
-- only move to longer windows' bands); a settle that logs nothing new likewise.
local logs_nothing = allowed == 0 or (settle and cost == 0)
if not writing or (logs_nothing and not rebuilt) then return result end
if logs_nothing then
  -- (as read: what the advance grew is not written; a rebuilt log is rewritten whole)
  F, G, A = rebuilt[1], rebuilt[2], rebuilt[3]
  grows = false
elseif cost > 0 then
  push(1, now, cost)
  newest = now
end

-- The key must outlive its newest entry by the longest window. The TTL is a quarter more
-- (renewed on the Redis clock only every quarter window), and at least a second, so that
-- a log of millisecond windows outlives the round trips between its checks.
local TTL = max(longest + floor(longest / 4), 1000)
local rewrite = not fits or jumped or grows
local renew = allowed == 1 and not (clock and clock + longest <= expire_at)
if renew or rewrite then expire_at = clock and clock + TTL or 0 end

-- The bytes of `count` entries of a list of added ones (times and totals), from its q-th.
local function entries(a, q, count)
  if count == 1 then return pack(ENTRY, a[2 * q - 1], a[2 * q]) end
  local parts = {}
  -- (a call takes at most 8,000 arguments: 1,024 entries at a time)
  for from = q, q + count - 1, 1024 do
    local k = min(1024, q + count - from)
    parts[#parts + 1] = pack('>' .. rep('I5', 2 * k), unpack(a, 2 * from - 1, 2 * (from + k) - 2))
  end
  return table.concat(parts)
end

local ring = nil
if rewrite then
  -- The whole string: every ring from its first slot, a ring that outgrew its capacity
  -- at twice it (at least 4, at most its most).
  ring = {}
  for i = 1, n do
    local k, x = 7 * i, 3 * i
    local c, l, st = F[k - 6], F[k - 4], G[x - 2]
    if st > 0 then
      -- its entries in the stored ring, as stored: one or two ranges, where the ring wraps
      local slot, at = F[k - 5], G[x - 1]
      local first = min(st, c - slot)
      local bytes = redis.call('GETRANGE', key, at + slot * E, at + (slot + first) * E - 1)
      if st > first then bytes = bytes .. redis.call('GETRANGE', key, at, at + (st - first) * E - 1) end
      if #bytes ~= st * E then error({err = DAMAGED}) end
      ring[#ring + 1] = bytes
    end
    if l > st then ring[#ring + 1] = entries(A[i], G[x], l - st) end
    if l > c then
      local s = exact and 1 or max(1, ceil(W[i] / 1024))
      local most = max(1, min(floor((W[i] - (i > 1 and W[i - 1] or 0)) / s) + 2, 131072))
      c = min(most, max(l, 2 * c, 4))
    end
    ring[#ring + 1] = rep('\0', (c - l) * E)
    F[k - 6], F[k - 5] = c, 0
  end
end

local header = GUARD .. char(VERSION, n, flags) .. pack('>I6I6', newest, expire_at) .. WINDOWS
  .. pack(BANDS, unpack(F, 1, X))

if ring then
  redis.call('SET', key, header .. table.concat(ring), 'PX', TTL)
  return result
end
-- Each band's added entries, from its slot after the stored ones (two ranges where the
-- ring wraps). The first band's ring follows the header: what of it this check wrote
-- joins the header's write, with the bytes read before its slot.
local tail = ''
for i = 1, n do
  local a = A[i]
  if a then
    local k, x = 7 * i, 3 * i
    local q, c = G[x], F[k - 6]
    local added = #a / 2 - q + 1
    if added > 0 then
      local slot = (F[k - 5] + G[x - 2]) % c
      local first = min(added, c - slot)
      local at = G[x - 1]
      if at + (slot + first) * E > 536870912 then error({err = DAMAGED}) end
      local from, bytes = at + slot * E, entries(a, q, first)
      local wrapped = added > first and entries(a, q + first, added - first) or ''
      if i == 1 and from <= #hdr then
        tail = wrapped .. sub(hdr, H + #wrapped + 1, from) .. bytes
      else
        redis.call('SETRANGE', key, from, bytes)
        if i == 1 then
          tail = wrapped
        elseif added > first then
          redis.call('SETRANGE', key, at, wrapped)
        end
      end
    end
  end
end
redis.call('SETRANGE', key, 0, header .. tail)
if renew then redis.call('PEXPIRE', key, TTL) end
return result
