-- Raise last_seen_turn on open candidates about any of the keys. ARGV: prefix, keys (JSON),
-- turn, C. Returns how many were raised.
local turn, C = tonumber(ARGV[3]), tonumber(ARGV[4])
local seen, raised = {}, 0
for _, k in ipairs(cjson.decode(ARGV[2])) do
  for _, id in ipairs(redis.call('SMEMBERS', P .. 'key:' .. k)) do
    if not seen[id] then
      seen[id] = true
      local c = load(id)
      if c and tonumber(c.last_seen_turn) < turn and live_open(c, turn, C) then
        update(id, c, { last_seen_turn = int(turn) })
        raised = raised + 1
      end
    end
  end
end
return raised
