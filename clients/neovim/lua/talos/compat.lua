-- Every Neovim API newer than 0.7 the plugin uses goes through here, each with its 0.7
-- fallback: nothing else in the plugin may call them (a test checks).
local M = {}

M.uv = vim.uv or vim.loop -- vim.uv: 0.10

local function has(version)
  return vim.fn.has('nvim-' .. version) == 1
end

-- 0.11 made the client's functions methods (client:request); the field form is deprecated.
local METHODS = has('0.11')

function M.request(client, method, params, handler, bufnr)
  if METHODS then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.notify(client, method, params)
  if METHODS then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

function M.stop(client, force)
  if METHODS then
    return client:stop(force)
  end
  return client.stop(force)
end

function M.is_stopped(client)
  if METHODS then
    return client:is_stopped()
  end
  return client.is_stopped()
end

--- The clients named `name` (attached to `bufnr`, when given).
function M.clients(name, bufnr)
  if vim.lsp.get_clients then -- 0.10
    return vim.lsp.get_clients({ name = name, bufnr = bufnr })
  end
  local out = {}
  for _, client in pairs(vim.lsp.get_active_clients()) do
    if client.name == name and (bufnr == nil or vim.lsp.buf_is_attached(bufnr, client.id)) then
      table.insert(out, client)
    end
  end
  return out
end

--- Start a client for `config.root_dir`, or reuse the running one of that root, and attach
--- `bufnr`: `vim.lsp.start` on 0.8+, else `vim.lsp.start_client` and `buf_attach_client`
--- with our own one-per-root bookkeeping (`by_root`: root -> client id). Returns the id.
function M.start(config, bufnr, by_root)
  if vim.lsp.start then -- 0.8
    local id
    vim.api.nvim_buf_call(bufnr, function() -- 0.8 attaches the current buffer (no opts.bufnr)
      id = vim.lsp.start(config, {
        bufnr = bufnr,
        reuse_client = function(client, conf)
          return client.name == conf.name and client.config.root_dir == conf.root_dir
        end,
      })
    end)
    return id
  end
  local id = by_root[config.root_dir]
  local client = id and vim.lsp.get_client_by_id(id)
  if not client or M.is_stopped(client) then
    id = vim.lsp.start_client(config)
    if not id then
      return nil
    end
    by_root[config.root_dir] = id
  end
  vim.lsp.buf_attach_client(bufnr, id)
  return id
end

--- Start (or reuse) the client of `config.root_dir` with no buffer attached.
function M.start_detached(config, by_root)
  if vim.lsp.start and has('0.11') then -- the `attach` option: 0.11
    return vim.lsp.start(config, { attach = false })
  end
  local id = by_root[config.root_dir]
  local client = id and vim.lsp.get_client_by_id(id)
  if client and not M.is_stopped(client) then
    return id
  end
  id = vim.lsp.start_client(config)
  by_root[config.root_dir] = id
  return id
end

--- The health report functions of `:checkhealth`: vim.health.start/ok/... (0.9+),
--- vim.health.report_* (0.8), or the `health` module's report_* (0.7).
function M.health()
  local h = vim.health -- 0.8
  if h and h.start then
    return { start = h.start, ok = h.ok, warn = h.warn, error = h.error, info = h.info }
  end
  h = h or require('health')
  return { start = h.report_start, ok = h.report_ok, warn = h.report_warn,
           error = h.report_error, info = h.report_info }
end

--- Whether `fn` is still Neovim's own (defined in `file` of its runtime, e.g.
--- 'vim/_editor.lua' for vim.notify, 'vim/ui.lua' for vim.ui.select), not a plugin's.
function M.is_builtin(fn, file)
  if type(fn) ~= 'function' then
    return false
  end
  local source = debug.getinfo(fn, 'S').source or ''
  return source:sub(-#file - 1) == '/' .. file or source == '@' .. file
end

return M
