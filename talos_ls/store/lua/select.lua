-- The first step of a delivery (see Store.qq_select). ARGV: prefix, turn, K, C, recent-use
-- turns, signals (JSON), cues (JSON, or "" for no relevance timing), limit, checked kinds (JSON).
-- Returns {"closed"} | {"none"} | {"delivered", fields?} | {"check", JSON array of candidates}.
local turn, K, C = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local lo, limit = turn - tonumber(ARGV[5]), tonumber(ARGV[8])
if not budget_open(turn, K) then return { 'closed' } end
sweep(turn, C)

local function set_of(json)
  local s = {}
  for _, v in ipairs(cjson.decode(json)) do s[v] = true end
  return s
end
local signals, checked = set_of(ARGV[6]), set_of(ARGV[9])

local cues = nil
if ARGV[7] ~= '' then
  cues = cjson.decode(ARGV[7])
  local any = false
  for _, cue in ipairs(cues) do
    if redis.call('EXISTS', P .. 'cue:' .. cue) == 1 then
      any = true
      break
    end
  end
  if not any then return { 'none' } end
end

local function cue_match(id)
  if cues == nil then return true end
  for _, cue in ipairs(cues) do
    if redis.call('SISMEMBER', P .. 'cue:' .. cue, id) == 1 then return true end
  end
  return false
end

local eligible = {}
local min = '[' .. string.format('%016d', OFF - turn)
local max = '(' .. string.format('%016d', OFF - lo + 1)
local offset = 0
while #eligible < limit do
  local batch = redis.call('ZRANGEBYLEX', P .. 'impact', min, max, 'LIMIT', offset, 64)
  if #batch == 0 then break end
  offset = offset + #batch
  for _, member in ipairs(batch) do
    local id = string.sub(member, 44)
    local c = load(id)
    if c and deliverable(c.status) and tonumber(c.expires_turn) >= turn
        and (num(c.cooldown_until) == nil or num(c.cooldown_until) <= turn)
        and signals[c.ambiguity_signal]
        and tonumber(c.last_seen_turn) >= lo and tonumber(c.last_seen_turn) <= turn
        and cue_match(id) then
      eligible[#eligible + 1] = c
      if #eligible >= limit then break end
    end
  end
end

if #eligible == 0 then return { 'none' } end
if not checked[eligible[1].kind] then
  local leading = {}
  for _, c in ipairs(eligible) do
    if checked[c.kind] then break end
    leading[#leading + 1] = c.candidate_id
  end
  local got = deliver_first(leading, turn)
  if got then return { 'delivered', flatten(got) } end
  return { 'delivered' }
end
-- One JSON string, not nested arrays: a client parses a reply of 16 candidates' fields
-- element by element, and that cost more than the script.
local rows = {}
for _, c in ipairs(eligible) do
  rows[#rows + 1] = c
  if not checked[c.kind] then break end
end
return { 'check', cjson.encode(rows) }
