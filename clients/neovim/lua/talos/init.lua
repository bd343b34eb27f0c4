-- Talos in Neovim: the built-in LSP client on talos-ls, quickfix, vim.ui, diff mode and a
-- statusline component. Pure Lua; Neovim 0.7 or later. See :help talos.
local state = require('talos.state')

local M = {}

-- The command's arguments, without the empty one Neovim 0.7 gives for an omitted `?` argument.
local function arguments(o)
  local out = {}
  for _, arg in ipairs(o.fargs or {}) do
    if arg ~= '' then
      table.insert(out, arg)
    end
  end
  return out
end

local function commands()
  local c = require('talos.commands')
  local function create(name, fn, opts)
    vim.api.nvim_create_user_command(name, fn, opts)
  end
  local function tasks_complete()
    local ids = {}
    for _, status in pairs(state.status) do
      for _, t in ipairs(type(status.running) == 'table' and status.running or {}) do
        table.insert(ids, t.id)
      end
    end
    for _, id in pairs(state.last_task) do
      table.insert(ids, id)
    end
    return ids
  end
  create('TalosTask', function(o)
    if o.range > 0 then
      c.task(o.args, o.line1, o.line2)
    else
      c.task(o.args)
    end
  end, { nargs = '*', range = true, desc = 'Talos: start a task (on the selected lines)' })
  create('TalosCancel', function(o) c.cancel(o.args) end,
    { nargs = '?', complete = tasks_complete, desc = 'Talos: cancel a running task' })
  create('TalosTasks', function() c.tasks() end, { desc = 'Talos: running and recent tasks' })
  create('TalosShow', function(o) c.show(o.args) end,
    { nargs = '?', complete = tasks_complete, desc = "Talos: a task's transcript" })
  create('TalosProposals', function() c.proposals(true) end,
    { desc = 'Talos: the hunks to review, in the quickfix list' })
  create('TalosApply', function(o) c.apply(arguments(o)) end,
    { nargs = '*', desc = 'Talos: apply the proposal here ([hunk]: only that change)' })
  create('TalosReject', function(o) c.reject(arguments(o)) end,
    { nargs = '?', desc = 'Talos: reject the proposal here' })
  create('TalosUndo', function(o) c.undo(arguments(o)) end,
    { nargs = '?', desc = 'Talos: undo the last applied proposal' })
  create('TalosUndoTask', function(o) c.undo_task(o.args) end,
    { nargs = '?', complete = tasks_complete, desc = "Talos: undo every change of a task" })
  create('TalosDiff', function(o) c.diff(arguments(o)) end,
    { nargs = '?', desc = 'Talos: base and proposed text in diff mode' })
  create('TalosQuestions', function() c.questions() end,
    { desc = "Talos: answer the agent's open questions" })
  create('TalosChat', function() require('talos.chat').open() end,
    { desc = 'Talos: the conversation: tasks as they stream, and follow-ups' })
  create('TalosFollowUp', function(o) c.follow_up(o.args) end,
    { nargs = '*', desc = 'Talos: follow up on the latest task (a new task when none)' })
  create('TalosMessages', function() c.messages() end,
    { desc = "Talos: this session's messages, whole" })
  create('TalosMemory', function() c.memory() end, { desc = 'Talos: what it remembers' })
  create('TalosForget', function(o) c.forget(o.args) end, {
    nargs = '?', desc = 'Talos: retract a remembered fact',
    complete = function() return c.memory_keys end,
  })
end

--- Start Talos: `opts.cmd` (default { 'talos-ls' }), `opts.settings` (initializationOptions:
--- model, baseUrl, apiKeyEnv, maxCost, permissionMode, ...), `opts.root_markers`,
--- `opts.progress`, `opts.progress_interval_ms`, `opts.open_quickfix`, `opts.on_attach`.
--- A client per root, attached to every file buffer of that root, now and from now on.
function M.setup(opts)
  state.configure(opts)
  commands()
  local client = require('talos.client')
  local group = vim.api.nvim_create_augroup('Talos', { clear = true })
  vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile', 'BufFilePost' }, {
    group = group,
    callback = function(args) client.attach(args.buf) end,
  })
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) then
      client.attach(bufnr)
    end
  end
  return M
end

--- The statusline component, e.g. `talos 2▶ $0.04 ?1`: running tasks, the session's cost
--- (tokens for a model without a price), open questions. '' until Talos reports.
function M.statusline(opts)
  return require('talos.status').statusline(opts)
end

--- The last `talos/status` (a table, as docs/lsp.md describes it) for the current buffer.
function M.status()
  return (require('talos.status').current())
end

--- Start a task from Lua: `require('talos').task('explain this')`.
function M.task(prompt, line1, line2)
  return require('talos.commands').task(prompt, line1, line2)
end

--- Open the chat (:TalosChat); returns its buffer.
function M.chat()
  return require('talos.chat').open()
end

--- The Talos client of a buffer (0: the current one), or nil.
function M.client(bufnr)
  return require('talos.client').get(bufnr)
end

return M
