-- luacheck clients/neovim
std = 'luajit'
globals = { 'vim' }
max_line_length = 100
exclude_files = { '.luacheckrc' }
