-- What the plugin holds: its configuration and, per Talos client, the last `talos/status`.
local M = {}

M.NAME = 'talos'

M.defaults = {
  cmd = { 'talos-ls' }, -- the server; a list, as vim.lsp takes it
  settings = {}, -- initializationOptions: model, baseUrl, apiKeyEnv, maxCost, ...
  root_markers = { '.git', 'pyproject.toml', 'package.json' },
  progress = true, -- $/progress through vim.notify (left to fidget.nvim when it is there)
  progress_interval_ms = 1000, -- at most one report per task this often (begin and end always)
  open_quickfix = true, -- :TalosProposals opens the quickfix window
  prompt_idle_ms = 500, -- a prompt's menu opens after this long without a key pressed
  chat_split = 'botright split', -- how :TalosChat opens its window (an Ex command)
  on_attach = nil, -- function(client, bufnr), as for any LSP client
}

M.config = vim.deepcopy(M.defaults)
M.by_root = {} -- root -> client id (Neovim 0.7; vim.lsp.start keeps its own on 0.8+)
M.status = {} -- client id -> the last talos/status
M.last_status = nil -- the client id whose status came last
M.last_task = {} -- client id -> the id of the last task started from this editor
M.conversation = {} -- client id -> true: its server sends talos/conversation events

function M.configure(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  if opts and opts.root_markers then
    M.config.root_markers = opts.root_markers -- a list replaces, never merges
  end
  if opts and opts.cmd then
    M.config.cmd = opts.cmd
  end
  return M.config
end

return M
