-- Dedup-or-create. ARGV: prefix, row (JSON of strings or null), sha1 of the normalized text,
-- turn, cooldown turns C, retention turns R. Returns {created (0/1), candidate fields}.
local row = cjson.decode(ARGV[2])
local sha, turn, C, R = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

local found = {}
for _, id in ipairs(redis.call('SMEMBERS', P .. 'text:' .. sha)) do found[id] = 'text' end
for _, k in ipairs(cjson.decode(row.target_keys)) do
  for _, id in ipairs(redis.call('SMEMBERS', P .. 'key:' .. k)) do
    if not found[id] then found[id] = 'key' end
  end
end

local best, best_c
for id, how in pairs(found) do
  local c = load(id)
  if c and (how == 'text' or c.kind == row.kind) then
    local ok = live_open(c, turn, C)
    if not ok and c.status == 'answered' then
      local ref = num(c.resolved_turn) or num(c.last_seen_turn) or num(c.created_turn) or 0
      ok = turn - ref <= R
    end
    if ok then
      local ct, bt = tonumber(c.created_turn), best_c and tonumber(best_c.created_turn)
      if not best or ct < bt or (ct == bt and id < best) then best, best_c = id, c end
    end
  end
end

if best then
  if best_c.status ~= 'answered' and turn > tonumber(best_c.last_seen_turn) then
    update(best, best_c, { last_seen_turn = int(turn) })
  end
  return { 0, flatten(best_c) }
end

local id = row.candidate_id
local c = { text_sha = sha }
local fields = { 'text_sha', sha }
for k, v in pairs(row) do
  if v ~= cjson.null then
    c[k] = v
    fields[#fields + 1] = k
    fields[#fields + 1] = v
  end
end
redis.call('HSET', P .. 'c:' .. id, unpack(fields))
redis.call('ZADD', P .. 'ids', tonumber(c.created_turn), id)
redis.call('SADD', P .. 'text:' .. sha, id)
for _, k in ipairs(cjson.decode(c.target_keys)) do redis.call('SADD', P .. 'key:' .. k, id) end
reindex(id, nil, c)
return { 1, flatten(c) }
