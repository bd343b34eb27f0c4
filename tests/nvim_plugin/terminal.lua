-- Neovim at a real terminal (its TUI on a pseudo-terminal) with the Talos plugin set up as a
-- person would: nothing replaced, Neovim's own vim.notify and vim.ui.select. Driven by keys
-- from tests/nvim_plugin/test_terminal.py; parameters in the JSON file named by
-- $TALOS_E2E_CONFIG: {plugin, cmd, settings, modes}.
-- The only thing added: a timer that writes every change of mode to `modes` (one a line,
-- e.g. `r` for a hit-enter prompt), as what the screen shows may be redrawn over.

local cfg = vim.fn.json_decode(table.concat(vim.fn.readfile(os.getenv('TALOS_E2E_CONFIG')), '\n'))
vim.opt.runtimepath:prepend(cfg.plugin)

local modes = assert(io.open(cfg.modes, 'w'))
local last = nil
local timer = vim.loop.new_timer()
timer:start(0, 10, function()
  local mode = vim.api.nvim_get_mode().mode
  if mode ~= last then
    last = mode
    modes:write(mode, '\n')
    modes:flush()
  end
end)

vim.o.laststatus = 2
vim.o.statusline = "%f %= %{v:lua.require'talos'.statusline()}"
vim.o.showtabline = 1
require('talos').setup({ cmd = cfg.cmd, settings = cfg.settings, progress_interval_ms = 0 })
