-- Expire the stale, then grant and claim. ARGV: prefix, turn, K, candidate ids (JSON),
-- expirations (JSON [[id, status read], ...]). Returns the claimed fields, or false.
local turn, K = tonumber(ARGV[2]), tonumber(ARGV[3])
for _, pair in ipairs(cjson.decode(ARGV[5])) do
  local c = load(pair[1])
  if c and c.status == pair[2] then
    update(pair[1], c, { status = 'expired', resolved_turn = int(turn) })
  end
end
if not budget_open(turn, K) then return false end
local got = deliver_first(cjson.decode(ARGV[4]), turn)
if got then return flatten(got) end
return false
