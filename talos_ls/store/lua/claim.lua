-- Compare-and-set. ARGV: prefix, candidate id, allowed statuses (JSON), updates (JSON: field ->
-- string, or null to clear), guard (JSON: field -> string, or null for "absent"). Returns 1/0.
local id = ARGV[2]
local c = load(id)
if not c then return 0 end
local allowed = false
for _, s in ipairs(cjson.decode(ARGV[3])) do
  if c.status == s then allowed = true end
end
if not allowed then return 0 end
for field, want in pairs(cjson.decode(ARGV[5])) do
  if want == cjson.null then
    if c[field] ~= nil then return 0 end
  elseif c[field] ~= want then
    return 0
  end
end
local changes = {}
for field, value in pairs(cjson.decode(ARGV[4])) do
  if value == cjson.null then changes[field] = false else changes[field] = value end
end
update(id, c, changes)
return 1
