-- ARGV: prefix, turn, C. Returns how many were expired.
return sweep(tonumber(ARGV[2]), tonumber(ARGV[3]))
