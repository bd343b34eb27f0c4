/**
 * The conversation as the panel shows it, kept in the extension host: the server's
 * `talos/conversation` events (begin, text, step, proposal, end), its deferred prompts
 * (`talos/prompt`, `talos/promptClosed`) and what the person did (answered a prompt, started
 * afresh), folded into tasks in the order they began. Pure (no `vscode`) so it is unit-tested;
 * the panel sends it to its webview, which renders it.
 *
 * Events are checked field by field: a malformed one is dropped, never half applied. Sizes are
 * bounded (text, steps, tasks kept): the transcript (`talos.task.show`) has everything.
 */

export interface ProposalRow {
  id: string;
  path: string;
  status: string;
  task_id: string | null;
  hunks: number;
}

export interface PromptRow {
  prompt_id: string;
  kind: string;
  message: string;
  actions: string[];
  /** Which task asks, when the server says or it can be told (one task running). */
  task_id?: string | null;
}

export interface TaskEnd {
  state: string;
  result: string | null;
  error: string | null;
  tokens: number | null;
  cost: number | null;
  /** Some usage was counted from the text: the endpoint reported none (a call cut short). */
  estimated: boolean;
}

export interface TaskEntry {
  id: string;
  folder: string;
  title: string;
  follows: string | null;
  /** The model's answer so far (raw Markdown: rendered safely by the webview). */
  text: string;
  steps: string[];
  proposals: ProposalRow[];
  prompts: PromptRow[];
  /** The person's answers to this task's prompts, in order: `Allow once`, `pytest`. */
  answers: string[];
  end: TaskEnd | null;
  /** Bumped on every change of this task: the webview redraws only what changed. */
  rev: number;
}

export type ServerEvent =
  | { kind: 'begin'; task_id: string; folder: string; title: string; follows: string | null }
  | { kind: 'text'; task_id: string; text: string }
  | { kind: 'step'; task_id: string; message: string }
  | { kind: 'proposal'; task_id: string; proposal: ProposalRow }
  | { kind: 'end'; task_id: string } & TaskEnd;

export const LIMITS = { text: 400_000, steps: 200, tasks: 50, prompts: 20 };
const ID = /^[A-Za-z0-9_-]{1,64}$/;
export const ENDED = ['done', 'failed', 'cancelled', 'stopped', 'interrupted'];

function str(v: unknown): v is string {
  return typeof v === 'string';
}

function num(v: unknown): number | null {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  return null;
}

/** Tokens as the server may count them: a number, or `{in, out}`-like parts to add up. */
function tokenCount(v: unknown): number | null {
  const n = num(v);
  if (n !== null) return n;
  if (typeof v === 'object' && v !== null) {
    const parts = Object.values(v).map(num).filter((x): x is number => x !== null);
    return parts.length ? parts.reduce((a, b) => a + b, 0) : null;
  }
  return null;
}

export function proposalRow(v: unknown): ProposalRow | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const p = v as Record<string, unknown>;
  if (!str(p.id) || !ID.test(p.id) || !str(p.path) || !str(p.status)) return undefined;
  return { id: p.id, path: p.path, status: p.status, task_id: str(p.task_id) ? p.task_id : null, hunks: num(p.hunks) ?? 0 };
}

/** A `talos/conversation` event, checked; undefined when it is not one. */
export function serverEvent(v: unknown): ServerEvent | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const e = v as Record<string, unknown>;
  if (!str(e.task_id) || !ID.test(e.task_id)) return undefined;
  const task_id = e.task_id;
  switch (e.kind) {
    case 'begin':
      return { kind: 'begin', task_id, folder: str(e.folder) ? e.folder : '', title: str(e.title) ? e.title : '', follows: str(e.follows) && ID.test(e.follows) ? e.follows : null };
    case 'text':
      return str(e.text) ? { kind: 'text', task_id, text: e.text } : undefined;
    case 'step':
      return str(e.message) ? { kind: 'step', task_id, message: e.message } : undefined;
    case 'proposal': {
      const proposal = proposalRow(e.proposal);
      return proposal ? { kind: 'proposal', task_id, proposal } : undefined;
    }
    case 'end':
      return {
        kind: 'end', task_id, state: str(e.state) ? e.state : 'done', result: str(e.result) ? e.result : null,
        error: str(e.error) ? e.error : null, tokens: tokenCount(e.tokens), cost: num(e.cost),
        estimated: e.estimated === true,
      };
    default:
      return undefined;
  }
}

/** A `talos/prompt`, checked. */
export function promptRow(v: unknown): PromptRow | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const p = v as Record<string, unknown>;
  if (!str(p.prompt_id) || !ID.test(p.prompt_id) || !str(p.message) || !Array.isArray(p.actions) || !p.actions.every(str)) return undefined;
  const row: PromptRow = { prompt_id: p.prompt_id, kind: str(p.kind) ? p.kind : 'question', message: p.message, actions: (p.actions as string[]).slice(0, 10) };
  if (str(p.task_id) && ID.test(p.task_id)) row.task_id = p.task_id;
  return row;
}

/** Whitespace-blind, to tell whether the final answer was streamed already. */
function squash(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}

export class Conversation {
  tasks: TaskEntry[] = [];
  /** Prompts no task can be named for (a settings confirmation, or several tasks running). */
  loose: PromptRow[] = [];
  /** Tasks before this id are an earlier conversation: hidden, and not followed up. */
  private from = 0;
  private clock = 0;

  private tick(task: TaskEntry): TaskEntry {
    task.rev = ++this.clock;
    return task;
  }

  get rev(): number {
    return this.clock;
  }

  /** The tasks of the conversation shown now. */
  get shown(): TaskEntry[] {
    return this.tasks.slice(this.from);
  }

  task(id: string): TaskEntry | undefined {
    return this.tasks.find((t) => t.id === id);
  }

  /** The task a follow-up continues: the conversation's latest. */
  get latest(): TaskEntry | undefined {
    const shown = this.shown;
    return shown[shown.length - 1];
  }

  get running(): TaskEntry[] {
    return this.tasks.filter((t) => !t.end);
  }

  private entry(id: string, folder = ''): TaskEntry {
    let task = this.task(id);
    if (!task) {
      // an event of a task this window did not see begin (the window was reloaded)
      task = { id, folder, title: '', follows: null, text: '', steps: [], proposals: [], prompts: [], answers: [], end: null, rev: 0 };
      this.tasks.push(task);
      if (this.tasks.length > LIMITS.tasks) {
        const dropped = this.tasks.length - LIMITS.tasks;
        this.tasks.splice(0, dropped);
        this.from = Math.max(0, this.from - dropped);
      }
    }
    return task;
  }

  /** A server event; returns the id of the task it changed, if any. */
  apply(event: ServerEvent): string | undefined {
    const task = this.entry(event.task_id, event.kind === 'begin' ? event.folder : '');
    switch (event.kind) {
      case 'begin':
        task.folder = event.folder || task.folder;
        task.title = event.title;
        task.follows = event.follows;
        break;
      case 'text':
        if (task.text.length < LIMITS.text) task.text = (task.text + event.text).slice(0, LIMITS.text);
        break;
      case 'step':
        task.steps.push(event.message);
        if (task.steps.length > LIMITS.steps) task.steps.splice(0, task.steps.length - LIMITS.steps);
        break;
      case 'proposal': {
        const at = task.proposals.findIndex((p) => p.id === event.proposal.id);
        if (at === -1) task.proposals.push(event.proposal);
        else task.proposals[at] = event.proposal;
        break;
      }
      case 'end': {
        const { state, result, error, tokens, cost, estimated } = event;
        task.end = { state, result, error, tokens, cost, estimated };
        // the final answer, when it did not stream (or streamed only in part)
        if (result && !squash(task.text).includes(squash(result))) {
          task.text = task.text.trim() ? `${task.text.trimEnd()}\n\n${result}` : result;
        }
        // its prompts stay until the server closes them: a question outlives its task
        break;
      }
    }
    this.tick(task);
    return task.id;
  }

  /** A proposal changed state outside a task's events (`talos/proposals`). */
  proposalChanged(row: ProposalRow): string | undefined {
    for (const task of this.tasks) {
      const at = task.proposals.findIndex((p) => p.id === row.id);
      if (at !== -1 && task.proposals[at].status !== row.status) {
        task.proposals[at] = { ...task.proposals[at], status: row.status, hunks: row.hunks };
        this.tick(task);
        return task.id;
      }
    }
    return undefined;
  }

  /** A prompt arrived: with its task when the server names it or only one task runs. */
  prompt(row: PromptRow): string | undefined {
    this.close(row.prompt_id);
    const running = this.running;
    const taskId = row.task_id && this.task(row.task_id) ? row.task_id : running.length === 1 ? running[0].id : undefined;
    if (taskId) {
      const task = this.task(taskId)!;
      task.prompts.push({ ...row, task_id: taskId });
      this.tick(task);
      return taskId;
    }
    this.loose.push({ ...row, task_id: null });
    if (this.loose.length > LIMITS.prompts) this.loose.shift();
    this.clock++;
    return undefined;
  }

  findPrompt(promptId: string): PromptRow | undefined {
    return this.loose.find((p) => p.prompt_id === promptId) ?? this.tasks.flatMap((t) => t.prompts).find((p) => p.prompt_id === promptId);
  }

  /** A prompt answered (`choice`) or closed by the server: it goes from the panel. */
  close(promptId: string, choice?: string): string | undefined {
    const loose = this.loose.findIndex((p) => p.prompt_id === promptId);
    if (loose !== -1) {
      this.loose.splice(loose, 1);
      this.clock++;
      return undefined;
    }
    for (const task of this.tasks) {
      const at = task.prompts.findIndex((p) => p.prompt_id === promptId);
      if (at === -1) continue;
      task.prompts.splice(at, 1);
      if (choice) task.answers.push(choice);
      this.tick(task);
      return task.id;
    }
    return undefined;
  }

  /** The server went away: its running tasks will not report their end, its prompts are gone. */
  serverLost(): string[] {
    const changed: string[] = [];
    for (const task of this.tasks) {
      if (task.end && !task.prompts.length) continue;
      if (!task.end) task.end = { state: 'interrupted', result: null, error: 'the language server stopped', tokens: null, cost: null, estimated: false };
      task.prompts = [];
      this.tick(task);
      changed.push(task.id);
    }
    this.loose = [];
    this.clock++;
    return changed;
  }

  /** "New conversation": what was shown is put away; the next message starts a new task. */
  startAfresh(): void {
    this.from = this.tasks.length;
    this.clock++;
  }
}

/** What the input box does with a message: follow up the latest task, or start one. */
export type Send =
  | { command: 'talos.task.followUp'; argument: { task_id: string; prompt: string } }
  | { command: 'talos.task.start'; argument: { prompt: string } }
  | { refused: string };

export function sendFor(conversation: Conversation, prompt: string): Send {
  const text = prompt.trim();
  if (!text) return { refused: 'Type a message first.' };
  if (text.length > 20_000) return { refused: 'At most 20,000 characters.' };
  const latest = conversation.latest;
  if (!latest) return { command: 'talos.task.start', argument: { prompt: text } };
  if (!latest.end) return { refused: 'Talos is still working on the last request: wait for it, or Stop it.' };
  return { command: 'talos.task.followUp', argument: { task_id: latest.id, prompt: text } };
}

/** `$0.0412`, or `<$0.0001` for a cost that is not nothing. */
export function cost(usd: number | null): string {
  if (usd === null) return '';
  if (usd > 0 && usd < 0.0001) return '<$0.0001';
  return usd < 1 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

/** What a task cost, as its end says it: `$0.0412`, `$0.0412 (estimated)`, or nothing. */
export function spent(end: TaskEnd): string {
  const usd = cost(end.cost);
  return usd && end.estimated ? `${usd} (estimated)` : usd;
}

/** The one line a "done" toast says: `Talos t12 done: <the answer's start> · $0.0300`. */
export function doneMessage(task: TaskEntry): string | undefined {
  const end = task.end;
  if (!end || end.state === 'cancelled') return undefined; // the person cancelled it: they know
  const said = end.state === 'done' ? (end.result || task.text) : (end.error || end.state);
  const line = squash(said ?? '');
  const short = line.length > 200 ? `${line.slice(0, 199)}…` : line;
  const usd = spent(end);
  return `Talos ${task.id} ${end.state}: ${short || task.title || '(no answer)'}${usd ? ` · ${usd}` : ''}`;
}

/** A prompt's message split for a modal: the first line as its message, the rest as detail. */
export function promptParts(message: string): { first: string; detail: string } {
  const lines = message.replace(/\r\n?/g, '\n').split('\n');
  const first = lines.shift() ?? '';
  return { first, detail: lines.join('\n').replace(/^\n+|\n+$/g, '') };
}
