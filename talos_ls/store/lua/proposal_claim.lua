-- Compare-and-set a proposal. ARGV: prefix, id, allowed statuses (JSON list), updates (JSON:
-- field -> string, or null to clear). Returns the updated hash (flat), or nil when the
-- proposal is missing or its status is not allowed: the test and the write are one step.
local id = ARGV[2]
local h = P .. 'p:' .. id
local flat = redis.call('HGETALL', h)
if #flat == 0 then return false end
local p = {}
for i = 1, #flat, 2 do p[flat[i]] = flat[i + 1] end
local allowed = false
for _, s in ipairs(cjson.decode(ARGV[3])) do
  if p.status == s then allowed = true end
end
if not allowed then return false end
local hset, hdel = {}, {}
for field, value in pairs(cjson.decode(ARGV[4])) do
  if value == cjson.null then
    p[field] = nil
    hdel[#hdel + 1] = field
  else
    p[field] = value
    hset[#hset + 1] = field
    hset[#hset + 1] = value
  end
end
if #hset > 0 then redis.call('HSET', h, unpack(hset)) end
if #hdel > 0 then redis.call('HDEL', h, unpack(hdel)) end
proposal_index(id, p)
return flatten(p)
