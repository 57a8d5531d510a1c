-- ratekeeper: a key's log as one check reads and writes it: the check's state and the
-- functions on its bands, which log.lua's `check` uses. engine/src/lib.rs puts this file,
-- then log.lua, before check.lua, meters.lua and hold.lua.
--
-- The log's layout and rules are described once, in the engine crate's docs
-- (engine/src/lib.rs). These files are the engine's Lua twin (engine/src/log.rs) for
-- Redis servers without the module; core/tests/integration/engine_differential.rs holds
-- the two to equal replies and stored bytes.
--
-- (A script's tables and functions are made afresh each time it runs, and a call of a C
-- function costs more than most of the work it does: what every check of a script shares
-- (these functions, the clock) is made once, at the chunk's level, and the check's state
-- lives here, where they read it; formats are constants, numbers are read by arithmetic
-- rather than `tonumber`, and the header is read and written in few calls.)

local sub, min = string.sub, math.min
local pack, unpack5 = struct.pack, struct.unpack
local call = redis.call

-- The format's numbers are written where they are used, as literals: a function made here
-- pays for every variable of the chunk it reads, a constant's as much as any. They are:
--   10             bytes per entry (its time's 5-byte stamp, its band's 5-byte running total)
--   27             bytes of the header before the rules' windows (guard, format, n, flags,
--                  the newest time and the expiry, 6 bytes each); then 5 per window and
--                  35 per band (7 fields of 5 bytes), so that the rings start at 27 + 40n
--   '\4\0\255\255\255\255\255\128\0\0\0\0'   the guard, the header's first 12 bytes
--   5              the format (VERSION)
--   1099511627776  2^40, the range of a stored time and of a running total (a stored one
--                  is its value modulo 2^40: struct.pack writes its low bytes)
--   and the error a damaged log raises, 'ratekeeper: the stored log is damaged (...)'.

-- The Redis clock (ms), read once a script (by its first check): every check of it is
-- taken at one time.
local clock_ms = nil

-- The check's state, which the functions below read. Each rule's band (see the engine's
-- docs): F holds band i's header fields from k = 7i: F[k-6] cap, F[k-5] head, F[k-4]
-- len, F[k-3] out (the running total before its front), F[k-2] front and F[k-1] back
-- (their times), F[k] btot (the back's running total); and G from x = 3i: G[x-2] stored,
-- how many of its entries (from the front) are read from the stored ring, G[x-1] base,
-- where that ring starts, G[x] from, the first of A[i]'s entries still in the band. A[i]
-- holds the entries this check added to band i, each a time then a running total (made
-- when first needed). W holds the windows (shortest first); key is the log's; exact, whether
-- it keeps every entry.
local key, W, exact = nil, nil, false
local F, G, A = nil, nil, nil
-- the stored log's newest time, which its stamps are read back against
local t0 = 0
-- the stored ring's bytes last read (the next 32 entries read at once), and where
local chunk, chunk_at = '', 0
-- whether a band outgrew its ring
local grows = false

-- Entry j (from 0, its front) of band i: (time, running total), from the stored ring or
-- from what this check added.
local function entry(i, j)
  local x = 3 * i
  local st = G[x - 2]
  if j < st then
    local k = 7 * i
    local c = F[k - 6]
    local slot = (F[k - 5] + j) % c
    local off = G[x - 1] + slot * 10
    local at = off - chunk_at
    if at < 0 or at + 10 > #chunk then
      chunk, chunk_at, at = call('GETRANGE', key, off, off + min(32, c - slot, st - j) * 10 - 1), off, 0
      if #chunk < 10 then error({err = 'ratekeeper: the stored log is damaged (its bytes do not hold what its header says)'}) end
    end
    local s, tot = unpack5('>I5I5', chunk, at + 1)
    return t0 - (t0 - s) % 1099511627776, tot
  end
  local q, a = 2 * (G[x] + j - st), A[i]
  return a[q - 1], a[q]
end

-- Adds u units at time t to band i: merged into its back when both fall in one step (a
-- 1024th of its window, rounded up; 1 ms when keeping every entry) or when it holds its
-- most entries.
local function push(i, t, u)
  local k = 7 * i
  local tot = (F[k] + u) % 1099511627776
  F[k] = tot
  local l, b, a = F[k - 4], F[k - 1], A[i]
  local s = 1
  if not exact then
    local w = W[i] + 1023
    s = (w - w % 1024) / 1024
  end
  -- (l >= its most entries, min(floor(span / s) + 2, 131072), in fewer steps)
  local merged = l > 0 and (t - t % s == b - b % s
      or l >= 131072 or W[i] - (i > 1 and W[i - 1] or 0) < (l - 1) * s)
  local x = 3 * i
  if merged and G[x - 2] ~= l then
    -- the back is one this check added (the last of A[i])
    a[#a - 1], a[#a] = t, tot
  else
    if merged then
      -- the back is in the stored ring: it is rewritten from here, as added
      G[x - 2] = l - 1
    else
      F[k - 4] = l + 1
      if l == F[k - 6] then grows = true end
    end
    -- (A[i] made with its first entry: a table grown from empty is remade as it grows)
    if a then
      a[#a + 1] = t
      a[#a + 1] = tot
    else
      A[i] = {t, tot}
    end
  end
  F[k - 1] = t
  if F[k - 4] == 1 then F[k - 2] = t end
end

-- An empty log of n rules: its F and G.
-- (Made whole by a constructor for the common n: a table grown from empty is remade as it
-- grows.)
local function empty(n)
  if n == 1 then return {0, 0, 0, 0, 0, 0, 0}, {0, 0, 1} end
  if n == 4 then
    return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
      {0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1}
  end
  local f, g = {}, {}
  for k = 1, 7 * n do f[k] = 0 end
  for i = 1, n do g[3 * i - 2], g[3 * i - 1], g[3 * i] = 0, 0, 1 end
  return f, g
end

-- The bytes of `count` entries of a list of added ones (times and totals), from its q-th.
local function entries(a, q, count)
  if count == 1 then return struct.pack('>I5I5', a[2 * q - 1], a[2 * q]) end
  local parts = {}
  -- (a call takes at most 8,000 arguments: 1,024 entries at a time)
  for from = q, q + count - 1, 1024 do
    local k = math.min(1024, q + count - from)
    parts[#parts + 1] = struct.pack('>' .. string.rep('I5', 2 * k), unpack(a, 2 * from - 1, 2 * (from + k) - 2))
  end
  return table.concat(parts)
end

-- A settle gives its refund back in place: up to `refund` units of the first entry
-- (oldest first) from its time on, in the oldest band whose back is from then on; that
-- entry and the newer ones of its band are rewritten (as added ones), their running
-- totals less what it gave, and it is taken out when it is left with none.
-- (The log's state is given, not read where it lives: a function made where it lives
-- costs as much as every variable of it that it reads.) Returns whether it gave any back.
local function give_back(F, G, A, n, entry, refund, settle_at)
  local changed = false
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
          local mid = math.floor((older + j) / 2)
          if entry(i, mid) >= settle_at then j = mid else older = mid end
        end
      end
      local before = F[k - 3]
      if j > 0 then
        local _, tot = entry(i, j - 1)
        before = tot
      end
      local _, tot = entry(i, j)
      local units = (tot - before) % 1099511627776
      local given = math.min(refund, units)
      if given > 0 then
        local a = {}
        for q = j, l - 1 do
          local t, total = entry(i, q)
          if q > j or given < units then
            a[#a + 1] = t
            a[#a + 1] = (total - given) % 1099511627776
          end
        end
        G[x - 2], G[x] = j, 1
        A[i] = a
        l = j + #a / 2
        F[k - 4] = l
        F[k] = (F[k] - given) % 1099511627776
        if l > 0 then
          if j == 0 then F[k - 2] = entry(i, 0) end
          F[k - 1] = entry(i, l - 1)
        end
        changed = true
      end
      break
    end
  end
  return changed
end

-- Written for other rules (or in the previous format): every unit still inside the
-- longest window, put in the bands as a log of these rules holds them at its newest
-- time; written even when the check is denied, so that it is rebuilt once.
-- `all` is its stored bytes, `newest` the time of the check's log (0: none): returns the
-- newest time of the log rebuilt.
local function rebuild(all, newest, longest, refund, settle_at, n, W, push)
  local t0, m = 0, 0
  -- a settle's refund: from the first entry (oldest first) from its time on, once;
  -- nothing when the reservation left every window
  local function taken(t, u)
    if refund == 0 or t < settle_at then return u end
    local r = refund
    refund = 0
    if settle_at <= newest - longest then return u end
    return u - math.min(r, u)
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
    if at + 4 > #s then error({err = 'ratekeeper: the stored log is damaged (its bytes do not hold what its header says)'}) end
    return (struct.unpack('>I5', s, at))
  end
  if string.sub(all, 1, 12) == '\4\0\255\255\255\255\255\128\0\0\0\0' and #all > 12 then
    local n_old = string.byte(all, 14)
    if #all < 21 then error({err = 'ratekeeper: the stored log is damaged (its bytes do not hold what its header says)'}) end
    newest = struct.unpack('>I6', all, 16)
    t0, m = newest, newest % 1099511627776
    local ring = 27 + 40 * n_old
    local bands = {}
    for k = 1, n_old do
      local at = 27 + 5 * n_old + 35 * k - 34
      local c, h, l, o = dec5(all, at), dec5(all, at + 5), dec5(all, at + 10), dec5(all, at + 15)
      if l > c or (c > 0 and h >= c) or ring + c * 10 > #all then error({err = 'ratekeeper: the stored log is damaged (its bytes do not hold what its header says)'}) end
      bands[k] = {c, h, l, o, ring}
      ring = ring + c * 10
    end
    -- the oldest band first, each from its front
    for k = n_old, 1, -1 do
      local c, h, l, prev, ring_at = unpack(bands[k])
      for j = 0, l - 1 do
        local stamp, tot = struct.unpack('>I5I5', all, ring_at + ((h + j) % c) * 10 + 1)
        place(t0 - (m - stamp) % 1099511627776, (tot - prev) % 1099511627776)
        prev = tot
      end
    end
  elseif #all >= 29 and string.byte(all, 1) == 4 then
    -- the previous format: a ring of 5-byte timestamps, one per unit
    local old_h = 29 + 15 * string.byte(all, 2)
    local old_n, old_cap = dec5(all, 3), dec5(all, 8)
    if old_cap == 0 and old_n > 0 then error({err = 'ratekeeper: the stored log is damaged (its bytes do not hold what its header says)'}) end
    newest = struct.unpack('>I6', all, 18)
    t0, m = newest, newest % 1099511627776
    local run_t, run = nil, 0
    for s = math.max(0, old_n - old_cap), old_n - 1 do
      local t = t0 - (m - dec5(all, old_h + (s % old_cap) * 5 + 1)) % 1099511627776
      if t == run_t then
        run = run + 1
      else
        if run_t then place(run_t, run) end
        run_t, run = t, 1
      end
    end
    if run_t then place(run_t, run) end
  end
  return newest
end

