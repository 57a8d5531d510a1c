-- ratekeeper: one check (or peek, or settle) of one key's log against a whole rule set, as
-- the function `check` (check.lua says what it takes and returns), after bands.lua. The
-- common path makes four Redis calls (TIME, HMGET of the key's record, a GETRANGE of the
-- header and the first band's first entries, a SETRANGE of the header and the new entry),
-- plus a read every 32 entries that leave a band, and a write to each band an entry moved
-- into, unless it joins the header's (when it starts within the bytes read with it).

-- One check (or peek, or settle) of the log `key`: its record `record` and its scope's
-- bans `banned` (each nil when not read), its arguments ARGV[b + 1 .. last] (check.lua's
-- ARGV[1 ..]). Its writes are made at once, or, given a list `held`, added to it, each
-- {command, key, arguments...}, for the caller to make. Returns check.lua's reply.
local function check(log, record, banned, ARGV, b, last, held)
  key = log
  local flag = ARGV[b + 1]
  local mode = flag
  exact = false
  if #flag ~= 1 then mode, exact = sub(flag, 1, 1), sub(flag, 2, 2) == 'x' end
  local settle = mode == 's'
  local writing = mode == 'c' or settle
  local cost, settle_at, refund = ARGV[b + 2], 0, 0
  if settle then
    local c, a, r = string.match(cost, '^(%d+) (%d+) (%d+)$')
    cost, settle_at, refund = tonumber(c), tonumber(a), tonumber(r)
  else
    cost = cost + 0
  end
  local now = ARGV[b + 3]
  -- the Redis clock, when this check runs on it (TTLs always do)
  local clock = nil
  if now == '' then now = nil else now = tonumber(now) end
  if not now then
    if not clock_ms then
      local t = call('TIME')
      local us = t[2] + 0
      clock_ms = t[1] * 1000 + (us - us % 1000) / 1000
    end
    now, clock = clock_ms, clock_ms
  end

  -- The rules: the caller's, unless the key's record lists it or selects others.
  local n = ARGV[b + 4] + 0
  local WINDOWS = ARGV[b + 5]
  local first = b + 6
  local detail = ''
  local limits, windows = {}, {}
  local override = nil
  if record then
    local rec = call('HMGET', record, 's', 'b', 't', 'o')
    -- s, b, then the ban earned in the scope (read only when neither listed it)
    for i = 1, 3 do
      local field = rec[i]
      if i == 3 then field = banned and call('HMGET', banned, 'b')[1] end
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
      local i = b + 6 + 2 * n
      while i <= last do
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
    -- (the windows as numbers follow the limits; WINDOWS holds them as stored; the tables
    -- made whole by a constructor for the common n, as a table grown from empty is remade
    -- as it grows)
    if n == 1 then
      limits, windows = {ARGV[first] + 0}, {ARGV[first + 1] + 0}
    elseif n == 4 then
      limits = {ARGV[first] + 0, ARGV[first + 1] + 0, ARGV[first + 2] + 0, ARGV[first + 3] + 0}
      -- (read from WINDOWS, as stored: one call rather than four conversions of a string;
      -- struct.unpack's last value, the position after them, is dropped)
      windows = {unpack5('>I5I5I5I5', WINDOWS)}
      windows[5] = nil
    else
      for i = 1, n do
        limits[i], windows[i] = ARGV[first + i - 1] + 0, ARGV[first + n + i - 1] + 0
      end
    end
  end
  -- (windows come shortest first)
  local longest = n > 0 and windows[n] or 0
  local H = 27 + 40 * n
  local flags = exact and 1 or 0
  -- the formats of the bands' fields (7 each), alone and after the header's fixed part, and
  -- the last byte read with the header, H + 32 * 10 - 1 (a string: Redis writes a number
  -- given to a call with a costly printf)
  local BANDS, HEADER, READ_END
  if n == 1 then
    BANDS, HEADER, READ_END = '>I5I5I5I5I5I5I5', '>c0BBBI6I6c0I5I5I5I5I5I5I5', '386'
  elseif n == 2 then
    BANDS, HEADER = '>I5I5I5I5I5I5I5I5I5I5I5I5I5I5', '>c0BBBI6I6c0I5I5I5I5I5I5I5I5I5I5I5I5I5I5'
    READ_END = '426'
  elseif n == 4 then
    BANDS = '>I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5'
    HEADER = '>c0BBBI6I6c0I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5I5'
    READ_END = '506'
  else
    local bands = string.rep('I5', 7 * n)
    BANDS, HEADER, READ_END = '>' .. bands, '>c0BBBI6I6c0' .. bands, H + 32 * 10 - 1
  end
  local X = 7 * n
  W, A = windows, {false, false, false, false}
  F, G, chunk, chunk_at, grows = nil, nil, '', 0, false
  local newest, expire_at = 0, 0
  t0 = 0

  -- the header, and the first band's ring's first 32 entries (which follow it) in one read
  local hdr = call('GETRANGE', key, '0', READ_END)
  local size = #hdr
  local fresh = size == 0
  local fits, guarded = false, false
  if size >= H then
    local guard, version, rules, flagged, stored_newest, stored_expiry = unpack5('>c12BBBI6I6', hdr)
    guarded = guard == '\4\0\255\255\255\255\255\128\0\0\0\0'
    fits = guarded and version == 5 and rules == n and flagged == flags
      and sub(hdr, 27 + 1, 27 + 5 * n) == WINDOWS
    if fits then newest, expire_at = stored_newest, stored_expiry end
  else
    guarded = size > 12 and sub(hdr, 1, 12) == '\4\0\255\255\255\255\255\128\0\0\0\0'
  end
  if guarded and not fits and string.byte(hdr, 13) > 5 then
    error({err = 'ratekeeper: the stored log was written by a newer release of ratekeeper (log format '
      .. string.byte(hdr, 13) .. ', this release reads ' .. 5 .. '): upgrade this process'})
  end

  -- The bands as the read changed them, as of the log's newest entry (a log written for
  -- other rules rebuilt, or a settle's refund given back): written even when the check is
  -- denied or the settle logs nothing new, so that a log is rebuilt once.
  local rebuilt, changed = nil, false
  if fits then
    t0 = newest
    F = {unpack5(BANDS, hdr, 27 + 5 * n + 1)}
    chunk = hdr
    G = {0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1}
    local ring = H
    for i = 1, n do
      local k, x = 7 * i, 3 * i
      local c, l = F[k - 6], F[k - 4]
      if l > c or (c > 0 and F[k - 5] >= c) then error({err = 'ratekeeper: the stored log is damaged (its bytes do not hold what its header says)'}) end
      if l > 0 then
        F[k - 2], F[k - 1] = t0 - (t0 - F[k - 2]) % 1099511627776, t0 - (t0 - F[k - 1]) % 1099511627776
      end
      G[x - 2], G[x - 1], G[x] = l, ring, 1
      ring = ring + c * 10
    end
    -- a settle's refund, given back in place
    if settle and refund > 0 and settle_at > newest - longest then
      changed = give_back(F, G, A, n, entry, refund, settle_at)
    end
  else
    F, G = empty(n)
  end
  if not fits and not fresh then
    -- written for other rules (or in the previous format): rebuilt
    newest = rebuild(call('GET', key), newest, longest, refund, settle_at, n, W, push)
    t0 = newest
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
  local jumped = now - newest >= 1099511627776 / 2
  -- (a log that did not fit and was not rebuilt is empty already, a fresh key's among them)
  if jumped and (fits or changed) then
    F, G = empty(n)
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
        local u = (tot - F[k - 3]) % 1099511627776
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
    count = count + (F[k] - F[k - 3]) % 1099511627776
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
    cost = math.max(min(cost, 1099511627776 - 1 - count), 0)
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
          local units = (F[k] - o) % 1099511627776
          if need <= units then
            local last = F[k - 4] - 1
            local lo, hi = 0, 0
            while hi < last do
              local _, tot = entry(b, hi)
              if (tot - o) % 1099511627776 >= need then break end
              lo, hi = hi + 1, min(2 * hi + 1, last)
            end
            while lo < hi do
              local mid = math.floor((lo + hi) / 2)
              local _, tot = entry(b, mid)
              if (tot - o) % 1099511627776 >= need then hi = mid else lo = mid + 1 end
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
  local TTL = longest + (longest - longest % 4) / 4
  if TTL < 1000 then TTL = 1000 end
  local rewrite = not fits or jumped or grows
  local renew = allowed == 1 and not (clock and clock + longest <= expire_at)
  if renew or rewrite then expire_at = clock and clock + TTL or 0 end

  local ring = nil
  if rewrite then
    -- The whole string: every ring from its first slot, a ring that outgrew its capacity
    -- at twice it (at least 4, at most its most).
    -- (ring[1] the header, once it is made; the table made whole, its parts '' until set)
    ring = {'', '', '', '', '', '', '', '', ''}
    local r = 1
    for i = 1, n do
      local k, x = 7 * i, 3 * i
      local c, l, st = F[k - 6], F[k - 4], G[x - 2]
      if st > 0 then
        -- its entries in the stored ring, as stored: one or two ranges, where the ring wraps,
        -- each cut from the bytes read with the header when it lies within them (a young
        -- log's rings often do), else read
        local slot, at = F[k - 5], G[x - 1]
        local first = min(st, c - slot)
        local from, to = at + slot * 10, at + (slot + first) * 10 - 1
        local bytes
        if to < size then bytes = sub(hdr, from + 1, to + 1) else bytes = call('GETRANGE', key, from, to) end
        if st > first then
          to = at + (st - first) * 10 - 1
          if to < size then bytes = bytes .. sub(hdr, at + 1, to + 1)
          else bytes = bytes .. call('GETRANGE', key, at, to) end
        end
        if #bytes ~= st * 10 then error({err = 'ratekeeper: the stored log is damaged (its bytes do not hold what its header says)'}) end
        r = r + 1
        ring[r] = bytes
      end
      if l > st then
        r = r + 1
        ring[r] = entries(A[i], G[x], l - st)
      end
      if l > c then
        -- (its step, as push's; its most entries, min(floor(span / step) + 2, 131072))
        local s = 1
        if not exact then
          local w = W[i] + 1023
          s = (w - w % 1024) / 1024
        end
        local most = (W[i] - (i > 1 and W[i - 1] or 0)) / s
        most = most - most % 1 + 2
        if most > 131072 then most = 131072 elseif most < 1 then most = 1 end
        local grown = 2 * c
        if grown < l then grown = l end
        if grown < 4 then grown = 4 end
        c = grown < most and grown or most
      end
      if c > l then
        r = r + 1
        ring[r] = string.rep('\0', (c - l) * 10)
      end
      F[k - 6], F[k - 5] = c, 0
    end
  end

  local header = pack(HEADER, '\4\0\255\255\255\255\255\128\0\0\0\0', 5, n, flags, newest, expire_at,
    WINDOWS, unpack(F, 1, X))

  if ring then
    ring[1] = header
    local whole = table.concat(ring)
    if held then held[#held + 1] = {'SET', key, whole, 'PX', TTL} else call('SET', key, whole, 'PX', TTL) end
    return result
  end
  -- Each band's added entries, from its slot after the stored ones: two ranges where the
  -- ring wraps, the wrapped one at the ring's start, so that every range comes after the
  -- one before it. A range that starts within the bytes read with the header (the first
  -- band's ring, and often the next ones') joins the header's write (`head`, which ends at
  -- `pos`), with the bytes read before it; any other is written on its own.
  local head, pos = header, H
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
        if at + (slot + first) * 10 > 536870912 then
          error({err = 'ratekeeper: the stored log is damaged (its bytes do not hold what its header says)'})
        end
        for range = added > first and 1 or 2, 2 do
          local off, bytes = at, nil
          if range == 1 then bytes = entries(a, q + first, added - first)
          else off, bytes = at + slot * 10, entries(a, q, first) end
          if off >= pos and off <= size then
            if off > pos then head = head .. sub(hdr, pos + 1, off) .. bytes else head = head .. bytes end
            pos = off + #bytes
          elseif held then
            held[#held + 1] = {'SETRANGE', key, off, bytes}
          else
            call('SETRANGE', key, off, bytes)
          end
        end
      end
    end
  end
  if held then
    held[#held + 1] = {'SETRANGE', key, '0', head}
    if renew then held[#held + 1] = {'PEXPIRE', key, TTL} end
  else
    call('SETRANGE', key, '0', head)
    if renew then call('PEXPIRE', key, TTL) end
  end
  return result
end
