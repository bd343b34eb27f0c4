/**
 * The Talos view in the activity bar: tasks (state, cost), pending proposals and open
 * questions, fetched from the server when shown and refreshed on its notifications.
 * Labels are the model's or the workspace's text: shown with `label()` (no icons, no hidden
 * characters).
 */
import * as vscode from 'vscode';
import { dollars } from './status';
import type { Talos } from './talos';
import { label } from './text';

export interface TaskInfo { id: string; title: string; state: string; step: string | null; cost: string; error: string | null; folder: string }
export interface ProposalInfo { id: string; path: string; status: string; task_id: string | null; hunks: number }
export interface QuestionInfo { candidate_id: string; question: string; kind: string; options: string[]; status: string; folder: string }

type Node =
  | { kind: 'group'; group: 'tasks' | 'proposals' | 'questions' }
  | { kind: 'task'; task: TaskInfo }
  | { kind: 'proposal'; proposal: ProposalInfo }
  | { kind: 'question'; question: QuestionInfo }
  | { kind: 'message'; text: string };

const TASK_ICONS: Record<string, string> = {
  queued: 'clock', running: 'sync~spin', done: 'pass', failed: 'error', cancelled: 'circle-slash', stopped: 'debug-stop',
};

export class Overview implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners: vscode.Disposable[];

  constructor(private readonly talos: Talos) {
    this.listeners = [talos.onDidChange(() => this.refresh()), talos.onProposals(() => this.refresh())];
  }

  /** Coalesced: a streaming task reports its status many times a second. */
  refresh(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.changed.fire(undefined);
    }, 300);
  }

  getTreeItem(node: Node): vscode.TreeItem {
    switch (node.kind) {
      case 'group': {
        const titles = { tasks: 'Tasks', proposals: 'Proposals to review', questions: 'Open questions' };
        const item = new vscode.TreeItem(titles[node.group], vscode.TreeItemCollapsibleState.Expanded);
        item.id = `group:${node.group}`;
        item.contextValue = `group.${node.group}`;
        return item;
      }
      case 'task': {
        const t = node.task;
        const item = new vscode.TreeItem(label(t.title, 80));
        item.id = `task:${t.id}`;
        item.description = `${t.state} · ${dollars(t.cost)}`;
        item.tooltip = [label(t.title, 300), `${t.id} · ${t.state} · ${dollars(t.cost)}`, t.step ? label(t.step, 200) : '', t.error ? `error: ${label(t.error, 300)}` : ''].filter(Boolean).join('\n');
        item.iconPath = new vscode.ThemeIcon(TASK_ICONS[t.state] ?? 'circle-outline');
        item.contextValue = t.state === 'running' || t.state === 'queued' ? 'task.running' : 'task';
        item.command = { command: 'talos.showTranscript', title: 'Open Transcript', arguments: [t.id] };
        return item;
      }
      case 'proposal': {
        const p = node.proposal;
        const item = new vscode.TreeItem(label(p.path, 100));
        item.id = `proposal:${p.id}`;
        item.description = `${p.hunks} change${p.hunks === 1 ? '' : 's'} · ${p.status}`;
        item.tooltip = `Proposal ${p.id} on ${label(p.path, 300)}: ${p.status}. Click for the diff.`;
        item.iconPath = new vscode.ThemeIcon(p.status === 'stale' ? 'warning' : 'diff');
        item.contextValue = p.status === 'stale' ? 'proposal.stale' : 'proposal';
        item.command = { command: 'talos.showProposalDiff', title: 'Show Diff', arguments: [p.id] };
        return item;
      }
      case 'question': {
        const q = node.question;
        const item = new vscode.TreeItem(label(q.question, 100));
        item.id = `question:${q.candidate_id}`;
        item.description = q.options.map((o) => label(o, 30)).join(' / ');
        item.tooltip = label(q.question, 500);
        item.iconPath = new vscode.ThemeIcon('question');
        item.contextValue = 'question';
        item.command = { command: 'talos.answerQuestion', title: 'Answer', arguments: [q.candidate_id] };
        return item;
      }
      case 'message':
        return new vscode.TreeItem(node.text);
    }
  }

  async getChildren(node?: Node): Promise<Node[]> {
    if (!node) return this.talos.running ? [{ kind: 'group', group: 'tasks' }, { kind: 'group', group: 'proposals' }, { kind: 'group', group: 'questions' }] : [];
    if (node.kind !== 'group') return [];
    try {
      if (node.group === 'tasks') {
        const tasks = await this.talos.execute<TaskInfo[]>('talos.task.list');
        return tasks.length ? tasks.map((task) => ({ kind: 'task', task })) : [{ kind: 'message', text: 'No tasks yet: Talos: Start Task' }];
      }
      if (node.group === 'proposals') {
        const proposals = (await this.talos.execute<ProposalInfo[]>('talos.proposal.list')).filter((p) => ['pending', 'partly_applied', 'stale'].includes(p.status));
        return proposals.length ? proposals.map((proposal) => ({ kind: 'proposal', proposal })) : [{ kind: 'message', text: 'Nothing to review' }];
      }
      const questions = await answerable(this.talos);
      return questions.length ? questions.map((question) => ({ kind: 'question', question })) : [{ kind: 'message', text: 'No open questions' }];
    } catch (error) {
      return [{ kind: 'message', text: label(`Unavailable: ${(error as Error).message}`, 200) }];
    }
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.changed.dispose();
    for (const l of this.listeners) l.dispose();
  }
}

/**
 * The open questions the person can answer now. A cooled one (dismissed, to be asked again
 * after its cooldown) is open but not answerable: the queue would refuse the answer.
 */
export async function answerable(talos: Talos): Promise<QuestionInfo[]> {
  const questions = await talos.execute<QuestionInfo[]>('talos.questions.list');
  return questions.filter((q) => q.status === 'pending' || q.status === 'delivered');
}

/** The id of the task, proposal or question a tree node, a string or a command argument names. */
export function idOf(arg: unknown, kind: 'task' | 'proposal' | 'question'): string | undefined {
  if (typeof arg === 'string') return arg;
  if (typeof arg !== 'object' || arg === null) return undefined;
  const node = arg as Record<string, Record<string, unknown> | undefined>;
  const value = kind === 'task' ? node.task?.id : kind === 'proposal' ? node.proposal?.id : node.question?.candidate_id;
  return typeof value === 'string' ? value : undefined;
}
