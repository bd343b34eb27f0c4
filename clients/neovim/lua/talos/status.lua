-- `talos/status` kept per client, and the statusline component built from it:
-- `talos 2▶ $0.04 ?1` (running tasks, the session's cost, open questions, `mcp✗1` when an MCP
-- server failed); tokens instead of dollars for a model without a price.
local state = require('talos.state')
local text = require('talos.text')
local compat = require('talos.compat')

local M = {}

function M.update(client_id, status)
  if type(status) ~= 'table' then
    return
  end
  state.status[client_id] = status
  state.last_status = client_id
  vim.schedule(function()
    pcall(vim.cmd, 'redrawstatus!')
    vim.api.nvim_exec_autocmds('User', { pattern = 'TalosStatus', modeline = false })
  end)
end

function M.handler(_, result, ctx)
  M.update(ctx.client_id, result)
  return vim.NIL
end

--- The status for `bufnr`'s Talos client, else the one heard from last.
function M.current(bufnr)
  for _, client in ipairs(compat.clients(state.NAME, bufnr or vim.api.nvim_get_current_buf())) do
    if state.status[client.id] then
      return state.status[client.id], client.id
    end
  end
  local id = state.last_status
  if id and state.status[id] and vim.lsp.get_client_by_id(id) then
    return state.status[id], id
  end
  return nil
end

local function number(value)
  local n = (type(value) == 'string' or type(value) == 'number') and tonumber(value) or nil
  return n or 0
end

--- A cost in dollars: cents when there are some, else four places, never a bare $0 for a
--- cost that is not zero.
function M.dollars(value)
  local cost = number(value)
  if cost <= 0 then
    return '$0'
  elseif cost >= 0.01 then
    return string.format('$%.2f', cost)
  elseif cost >= 0.0001 then
    return string.format('$%.4f', cost)
  end
  return '<$0.0001'
end

function M.tokens(count)
  count = math.floor(number(count))
  if count >= 1000000 then
    return string.format('%.1fM tok', count / 1000000)
  elseif count >= 1000 then
    return string.format('%.1fk tok', count / 1000)
  end
  return string.format('%d tok', count)
end

--- The MCP servers that failed or stopped, in every folder: `{ name, state, error }`.
function M.failed_servers(status)
  local out = {}
  for _, folder in ipairs(type(status.folders) == 'table' and status.folders or {}) do
    local servers = type(folder) == 'table' and type(folder.mcp) == 'table' and folder.mcp or {}
    for _, server in ipairs(servers) do
      if type(server) == 'table' and (server.state == 'failed' or server.state == 'restarting') then
        table.insert(out, server)
      end
    end
  end
  return out
end

--- The component's text, plain (no statusline items), from a status table.
function M.format(status, opts)
  opts = opts or {}
  local running = type(status.running) == 'table' and status.running or {}
  local parts = { 'talos' }
  if #running > 0 then
    table.insert(parts, #running .. '▶')
  end
  local settings = type(status.settings) == 'table' and status.settings or {}
  if settings.priced == false then
    table.insert(parts, M.tokens(number(status.tokens_in) + number(status.tokens_out)))
  else
    table.insert(parts, M.dollars(status.cost_session))
  end
  local open = math.floor(number(status.open_questions))
  if open > 0 then
    table.insert(parts, '?' .. open)
  end
  local failed = M.failed_servers(status)
  if #failed > 0 then
    table.insert(parts, 'mcp✗' .. #failed)
  end
  if opts.title and #running > 0 and type(running[1]) == 'table' then
    table.insert(parts, text.line(running[1].title, opts.title_width or 30))
  end
  return table.concat(parts, ' ')
end

--- For 'statusline' (or lualine and the like): '' while Talos has said nothing; every '%'
--- doubled, so nothing the server sends can be a statusline item.
--- `opts.title`: add the first running task's title.
function M.statusline(opts)
  local status = M.current()
  if not status then
    return ''
  end
  return (M.format(status, opts):gsub('%%', '%%%%'))
end

return M
