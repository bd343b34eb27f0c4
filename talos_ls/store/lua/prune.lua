-- Delete non-pending candidates older than the retention window. ARGV: prefix, current turn,
-- retention turns. Returns the deleted ids (the caller drops their locators).
local turn, R = tonumber(ARGV[2]), tonumber(ARGV[3])
local deleted = {}
for _, id in ipairs(redis.call('ZRANGE', P .. 'ids', 0, -1)) do
  local c = load(id)
  if c and c.status ~= 'pending' then
    local ref = num(c.resolved_turn) or num(c.last_seen_turn) or num(c.created_turn) or 0
    if turn - ref > R then
      reindex(id, c, nil)
      for _, k in ipairs(cjson.decode(c.target_keys)) do
        redis.call('SREM', P .. 'key:' .. k, id)
      end
      redis.call('SREM', P .. 'text:' .. c.text_sha, id)
      redis.call('DEL', P .. 'c:' .. id)
      redis.call('ZREM', P .. 'ids', id)
      deleted[#deleted + 1] = id
    end
  end
end
return deleted
