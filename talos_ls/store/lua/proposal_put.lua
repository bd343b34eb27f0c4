-- Create or replace a proposal. ARGV: prefix, id, fields (JSON: field -> string or null).
local id = ARGV[2]
local h = P .. 'p:' .. id
local fields = hset_args(ARGV[3])
local p = {}
for i = 1, #fields, 2 do p[fields[i]] = fields[i + 1] end
redis.call('DEL', h)
redis.call('HSET', h, unpack(fields))
proposal_index(id, p)
return 1
