-- Delete settled proposals beyond the newest `keep` by (updated_at, id). ARGV: prefix, keep.
-- Returns the deleted ids (the caller drops their locators).
local keep = tonumber(ARGV[2])
local ids = redis.call('ZRANGE', P .. 'psettled', 0, -(keep + 1))
for _, id in ipairs(ids) do
  redis.call('DEL', P .. 'p:' .. id)
  redis.call('ZREM', P .. 'proposals', id)
  redis.call('ZREM', P .. 'psettled', id)
end
if #ids > 0 then redis.call('INCR', P .. 'pstamp') end
return ids
