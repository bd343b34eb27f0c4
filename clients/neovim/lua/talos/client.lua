-- One Talos client per root (the nearest directory above a file holding one of
-- `root_markers`, else the current directory), attached to every file buffer of that root.
local chat = require('talos.chat')
local compat = require('talos.compat')
local message = require('talos.message')
local progress = require('talos.progress')
local prompts = require('talos.prompts')
local state = require('talos.state')
local status = require('talos.status')
local text = require('talos.text')

local M = {}

local function exists(path)
  return compat.uv.fs_stat(path) ~= nil
end

local function parent(dir)
  local up = vim.fn.fnamemodify(dir, ':h')
  return up ~= dir and up or nil
end

--- The root of `path` (a file or a directory).
function M.root(path)
  local dir = path
  local stat = compat.uv.fs_stat(path)
  if not (stat and stat.type == 'directory') then
    dir = vim.fn.fnamemodify(path, ':h')
  end
  while dir do
    for _, marker in ipairs(state.config.root_markers) do
      if exists(dir .. '/' .. marker) then
        return dir
      end
    end
    dir = parent(dir)
  end
  return vim.fn.getcwd()
end

--- The file of a buffer Talos attaches to, or nil (scratch buffers, help, terminals...).
local function file_of(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= '' then
    return nil
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' or name:match('^%a[%w+.-]*://') then
    return nil
  end
  return vim.fn.fnamemodify(name, ':p')
end

local function show_message(_, result)
  if type(result) ~= 'table' then
    return vim.NIL
  end
  local levels = { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO,
                   vim.log.levels.DEBUG }
  local level = levels[result.type] or vim.log.levels.INFO
  message.say('Talos: ' .. text.plain(result.message), level)
  return vim.NIL
end

-- Neovim's own handler, without the `print` of the edit's label it does first (a message
-- that could wrap and raise a hit-enter prompt; Talos says what it applied itself).
local function apply_edit(err, params, ctx, config)
  if type(params) == 'table' and params.label ~= nil then
    params = vim.deepcopy(params)
    params.label = nil
  end
  return vim.lsp.handlers['workspace/applyEdit'](err, params, ctx, config)
end

local function proposals_changed()
  vim.schedule(function()
    require('talos.commands').refresh_quickfix()
  end)
  return vim.NIL
end

function M.config(root)
  local init_options = vim.deepcopy(state.config.settings or {})
  init_options.deferredPrompts = true -- prompts come as talos/prompt, answered later
  init_options.conversation = true -- tasks stream as talos/conversation, into the chat buffer
  return {
    name = state.NAME,
    cmd = state.config.cmd,
    root_dir = root,
    workspace_folders = {
      { uri = vim.uri_from_fname(root), name = vim.fn.fnamemodify(root, ':t') },
    },
    init_options = init_options,
    on_attach = state.config.on_attach,
    handlers = {
      ['talos/status'] = status.handler,
      ['talos/prompt'] = prompts.prompt_handler,
      ['talos/promptClosed'] = prompts.closed_handler,
      ['talos/proposals'] = proposals_changed,
      ['talos/conversation'] = chat.handler,
      ['workspace/applyEdit'] = apply_edit,
      ['window/showMessageRequest'] = prompts.message_request_handler,
      ['window/showMessage'] = show_message,
      ['$/progress'] = progress.handler,
    },
  }
end

--- Attach `bufnr` to the Talos client of its root, started when there is none. Returns the
--- client id, or nil for a buffer that is not a file.
function M.attach(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local file = file_of(bufnr)
  if not file then
    return nil
  end
  return compat.start(M.config(M.root(file)), bufnr, state.by_root)
end

--- The Talos client for `bufnr` (its own, else that of the current directory's root, else
--- any), or nil.
function M.get(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local mine = compat.clients(state.NAME, bufnr)[1]
  if mine then
    return mine
  end
  local all = compat.clients(state.NAME)
  local cwd_root = M.root(vim.fn.getcwd())
  for _, client in ipairs(all) do
    if client.config.root_dir == cwd_root then
      return client
    end
  end
  return all[1]
end

--- The Talos client for the current buffer, started for it (or for the current directory)
--- when there is none.
function M.ensure(bufnr)
  local client = M.get(bufnr)
  if client then
    return client
  end
  local id = M.attach(bufnr)
  if not id then
    id = compat.start_detached(M.config(M.root(vim.fn.getcwd())), state.by_root)
  end
  return id and vim.lsp.get_client_by_id(id)
end

--- A buffer's file as a URI, when it lies in `client`'s root (else nil: the server chooses).
function M.uri_in(client, bufnr)
  local file = file_of(bufnr)
  local root = client.config.root_dir
  if file and root and (file:sub(1, #root + 1) == root .. '/') then
    return vim.uri_from_fname(file)
  end
  return nil
end

return M
