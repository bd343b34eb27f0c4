/**
 * What the status bar shows, from the server's `talos/status`: pure, so it is unit-tested.
 * Costs arrive as decimal strings in USD; a model without a price shows tokens instead of a
 * cost that would always read $0.
 */
import { label } from './text';

export interface TaskStatus {
  id: string;
  title: string;
  state: string;
  step: string | null;
  cost: string;
}

export interface FolderStatus {
  root: string;
  turn?: number;
  open_questions?: number;
  budget_opens_at_turn?: number | null;
  index?: { ready: boolean; files: number; watched_by: string };
  sandbox?: { available: boolean; detail: string } | null;
  mcp?: { name: string; state: string; error: string }[];
}

export interface ServerStatus {
  running: TaskStatus[];
  tokens_in: number;
  tokens_out: number;
  cost_session: string;
  open_questions: number;
  store: { url: string; available: boolean; problem: string | null };
  settings: { model: string; priced?: boolean; maxCost?: string | null; permissionMode?: string };
  folders: FolderStatus[];
}

/**
 * The client's view of the server process, besides what the server reports. `blocked`: not
 * started because a setting that decides where the key goes cannot be applied in this window.
 */
export type Connection = 'starting' | 'running' | 'stopped' | 'failed' | 'blocked';

export interface StatusView {
  text: string;
  tooltip: string;
  warning: boolean;
  error: boolean;
}

/** `$0.0412`: four decimals below a dollar (a task's cost is often a fraction of a cent). */
export function dollars(cost: string | undefined): string {
  const value = Number(cost ?? '0');
  if (!Number.isFinite(value)) return '$?';
  if (value > 0 && value < 0.0001) return '<$0.0001'; // spent, if not much: never shown as $0
  return value < 1 ? `$${value.toFixed(4)}` : `$${value.toFixed(2)}`;
}

/** `12.3k` tokens. */
export function tokens(count: number): string {
  if (count < 1000) return String(count);
  if (count < 1_000_000) return `${(count / 1000).toFixed(1)}k`;
  return `${(count / 1_000_000).toFixed(1)}M`;
}

/** What is wrong, one line each: the store, a folder's sandbox, an MCP server that failed. */
export function problems(status: ServerStatus): string[] {
  const out: string[] = [];
  if (!status.store.available) {
    out.push(`store unavailable: ${label(status.store.problem ?? 'unknown reason', 300)}`);
  }
  for (const folder of status.folders) {
    if (folder.sandbox && !folder.sandbox.available) {
      out.push(`sandbox unavailable in ${label(folder.root, 200)}: ${label(folder.sandbox.detail, 300)} (commands are asked or refused, never run unconfined)`);
    }
    for (const server of folder.mcp ?? []) {
      if (server.state === 'failed' || server.state === 'restarting') {
        out.push(`MCP server ${label(server.name, 40)} ${server.state === 'failed' ? 'failed' : 'stopped'}: ${label(server.error, 300)}`);
      }
    }
  }
  return out;
}

export function statusView(status: ServerStatus | undefined, connection: Connection, why?: string): StatusView {
  if (connection === 'blocked') {
    return { text: '$(warning) Talos', tooltip: `${why ?? 'Talos is not started: a setting cannot be applied in this window.'}\n\nClick to check again.`, warning: true, error: false };
  }
  if (connection === 'failed') {
    return { text: '$(error) Talos', tooltip: 'Talos: the language server is not running. Click for the log and Restart.', warning: false, error: true };
  }
  if (connection !== 'running' || status === undefined) {
    const what = connection === 'stopped' ? 'stopped' : 'starting…';
    return { text: '$(loading~spin) Talos', tooltip: `Talos: the language server is ${what}`, warning: false, error: false };
  }
  const wrong = problems(status);
  const running = status.running.length;
  const priced = status.settings.priced !== false;
  const spent = priced ? dollars(status.cost_session) : `${tokens(status.tokens_in + status.tokens_out)} tok`;
  const parts = [wrong.length ? '$(warning) Talos' : running ? '$(sync~spin) Talos' : '$(hubot) Talos'];
  if (running) parts.push(`▶${running}`);
  parts.push(spent);
  if (status.open_questions) parts.push(`?${status.open_questions}`);
  return { text: parts.join(' '), tooltip: tooltip(status, wrong), warning: wrong.length > 0, error: false };
}

function tooltip(status: ServerStatus, wrong: string[]): string {
  const lines = ['Talos'];
  for (const problem of wrong) lines.push(`⚠ ${problem}`);
  const priced = status.settings.priced !== false;
  lines.push(
    `Model: ${label(status.settings.model, 80)}${priced ? '' : ' (no price: tokens are counted, not dollars)'}`,
    `Session: ${priced ? `${dollars(status.cost_session)}, ` : ''}${tokens(status.tokens_in)} tokens in, ${tokens(status.tokens_out)} out`,
  );
  if (status.settings.maxCost) lines.push(`Cost cap per task: ${dollars(status.settings.maxCost)}`);
  if (status.settings.permissionMode) lines.push(`Permission mode: ${status.settings.permissionMode}`);
  if (status.running.length) {
    lines.push('', `Running (${status.running.length}):`);
    for (const task of status.running) {
      const step = task.step ? ` · ${label(task.step, 60)}` : '';
      lines.push(`  ${label(task.title, 60)} · ${task.state}${step}${priced ? ` · ${dollars(task.cost)}` : ''}`);
    }
  }
  lines.push('', `Open questions: ${status.open_questions}`);
  for (const folder of status.folders) {
    const index = folder.index ? (folder.index.ready ? `${folder.index.files} files indexed` : `indexing (${folder.index.files} files so far)`) : '';
    const budget = folder.budget_opens_at_turn != null && folder.turn != null && folder.budget_opens_at_turn > folder.turn
      ? `next question from turn ${folder.budget_opens_at_turn}` : 'a question may be asked';
    lines.push(`${label(folder.root, 80)}: turn ${folder.turn ?? 0}, ${budget}${index ? `, ${index}` : ''}`);
  }
  lines.push('', 'Click for tasks.');
  return lines.join('\n');
}
