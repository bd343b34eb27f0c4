-- :checkhealth talos: the server command (found, and its version), the connection of each
-- Talos client, the settings sent (the key's variable named, never its value), and what the
-- plugin uses of Neovim (its version, vim.notify, vim.ui.select, the help tags).
local compat = require('talos.compat')
local state = require('talos.state')
local text = require('talos.text')

local M = {}

local VERSION_MS = 10000 -- how long `talos-ls --version` may take

--- The first line `argv` prints and its exit code, or nil and why.
local function run(argv)
  local out = {}
  local ok, job = pcall(vim.fn.jobstart, argv, {
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = function(_, data) vim.list_extend(out, data or {}) end,
    on_stderr = function(_, data) vim.list_extend(out, data or {}) end,
  })
  if not ok or job <= 0 then
    return nil, 'could not be run: ' .. text.line(job, 200)
  end
  local code = vim.fn.jobwait({ job }, VERSION_MS)[1]
  if code == -1 then
    vim.fn.jobstop(job)
    return nil, 'did not answer within ' .. (VERSION_MS / 1000) .. ' s'
  end
  for _, line in ipairs(out) do
    if line:match('%S') then
      return text.line(line, 200), code
    end
  end
  return '', code
end

local function check_server(h)
  h.start('talos: the server')
  local cmd = state.config.cmd
  if type(cmd) == 'string' then
    cmd = { cmd }
  end
  if type(cmd) ~= 'table' or type(cmd[1]) ~= 'string' or cmd[1] == '' then
    h.error('no server command: setup({ cmd = { ... } }) is ' .. text.line(vim.inspect(cmd), 200))
    return
  end
  local path = vim.fn.exepath(cmd[1])
  if path == '' then
    h.error('`' .. text.line(cmd[1], 200) .. '` (the server command) is not found on the PATH: '
      .. text.line(vim.env.PATH or '', 2000), {
        'pip install talos-ls (it puts talos-ls on the PATH), or give its full path:',
        "require('talos').setup({ cmd = { '/path/to/talos-ls' } })",
      })
    return
  end
  local where = path ~= cmd[1] and (' (' .. text.line(path, 400) .. ')') or ''
  h.ok('server command: ' .. text.line(table.concat(cmd, ' '), 400) .. where)
  local argv = vim.deepcopy(cmd)
  table.insert(argv, '--version')
  local version, code = run(argv)
  if version and code == 0 and version ~= '' then
    h.ok('version: ' .. version)
  else
    h.warn('`' .. text.line(table.concat(argv, ' '), 400) .. '` failed: ' ..
      text.line(version or code, 300))
  end
end

local function check_connection(h)
  h.start('talos: the connection')
  local clients = compat.clients(state.NAME)
  if #clients == 0 then
    h.info('no Talos client is running: one starts when a file of a project is opened'
      .. ' (after setup())')
    return
  end
  for _, client in ipairs(clients) do
    local root = text.line(client.config.root_dir, 400)
    if compat.is_stopped(client) then
      h.error('client ' .. client.id .. ' for ' .. root .. ' has stopped', {
        'the LSP log tells why: ' .. text.line(vim.lsp.get_log_path(), 400),
      })
    elseif not client.initialized then
      h.warn('client ' .. client.id .. ' for ' .. root .. ' is still starting')
    else
      local buffers = vim.tbl_count(vim.lsp.get_buffers_by_client_id(client.id))
      h.ok(string.format('client %d for %s: connected, %d buffer%s attached', client.id, root,
        buffers, buffers == 1 and '' or 's'))
      local status = state.status[client.id]
      if type(status) == 'table' then
        local settings = type(status.settings) == 'table' and status.settings or {}
        h.info('the server reports: model ' .. text.line(settings.model or '?', 100) ..
          ', session cost ' .. require('talos.status').dollars(status.cost_session))
      end
      if state.conversation[client.id] then
        h.ok('the server streams tasks to the chat (:TalosChat)')
      end
    end
  end
end

-- The settings as sent, every value one line; the key is never among them (only the NAME
-- of its variable), and a URL is shown without its credentials. A setting whose name says it
-- is a secret is not shown at all.
local function shown(value, name)
  if name:lower():match('token') or name:lower():match('secret') or name:lower():match('password')
      or (name:lower():match('key') and not name:match('Env$')) then
    return '(set, not shown)'
  end
  if type(value) == 'table' then
    return text.line(vim.fn.json_encode(value), 300)
  end
  local s = text.line(tostring(value), 300)
  return (s:gsub('^(%a[%w+.-]*://)[^/@]*@', '%1…@'))
end

local function check_settings(h)
  h.start('talos: the settings')
  local settings = state.config.settings or {}
  local names = vim.tbl_keys(settings)
  table.sort(names)
  if #names == 0 then
    h.info("no settings given: talos-ls's defaults (setup({ settings = { model = ..., ... } }))")
  end
  for _, name in ipairs(names) do
    h.info(text.line(name, 60) .. ' = ' .. shown(settings[name], tostring(name)))
  end
  local key_env = settings.apiKeyEnv or 'OPENAI_API_KEY'
  if type(key_env) == 'string' and (vim.env[key_env] or '') ~= '' then
    h.ok('the key variable ' .. text.line(key_env, 100) .. ' is set')
  else
    h.warn('the key variable ' .. text.line(key_env, 100) .. ' is not set in this Neovim', {
      'export ' .. text.line(key_env, 100) .. '=... before starting Neovim (a local model that'
        .. ' needs no key can ignore this)',
    })
  end
  h.info('the plugin adds deferredPrompts = true and conversation = true')
end

local function check_neovim(h)
  h.start('talos: Neovim')
  if vim.fn.has('nvim-0.7') == 1 then
    h.ok('Neovim 0.7 or later')
  else
    h.error('Talos needs Neovim 0.7 or later')
  end
  if compat.is_builtin(vim.notify, 'vim/_editor.lua') then
    h.info("messages: Neovim's own vim.notify: one line each (the whole text: :TalosMessages)")
  else
    h.info('messages: vim.notify as replaced by a plugin, given the whole text')
  end
  if compat.is_builtin(vim.ui.select, 'vim/ui.lua') then
    h.info("prompts: Neovim's own menu (inputlist), the whole message above the actions")
  else
    h.info('prompts: vim.ui.select as replaced by a plugin')
  end
  local help = vim.api.nvim_get_runtime_file('doc/talos.txt', false)[1]
  if vim.fn.getcompletion('talos-chat', 'help')[1] then
    h.ok(':help talos works')
  elseif help then
    h.warn(':help talos finds no tag', { ':helptags ' .. text.line(vim.fn.fnamemodify(help, ':h'),
      400) .. ' (or reinstall the plugin: it ships doc/tags)' })
  else
    h.warn('doc/talos.txt is not on the runtimepath')
  end
end

function M.check()
  local h = compat.health()
  check_server(h)
  check_connection(h)
  check_settings(h)
  check_neovim(h)
end

return M
