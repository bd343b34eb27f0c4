/**
 * The Talos conversation: a webview view in the Talos view container. It streams each task's
 * answer as it arrives, its steps, its proposals with Diff / Apply / Reject, its questions and
 * permission prompts with their actions as buttons, and its end; the input box at the bottom
 * follows up the conversation's latest task (or starts one).
 *
 * The state lives here, in the extension host (`Conversation`); the webview only draws it, so a
 * hidden or reloaded view redraws from it. The webview's page has a strict Content-Security-
 * Policy (`default-src 'none'`, its one script by nonce, no inline style) and builds the
 * model's text with text nodes only (`markdown.ts`). Its messages are checked here: it can ask
 * for an action on a task, proposal or prompt the host knows, nothing else.
 *
 * Toasts: one "needs you" per prompt and one per task's end, only while the panel is not in
 * view, each with Open (the panel, at that task). A permission prompt's toast opens the prompt
 * as a modal whose detail keeps its lines.
 */
import * as vscode from 'vscode';
import { page } from './page';
import { Conversation, doneMessage, promptParts, promptRow, proposalRow, sendFor, serverEvent, type PromptRow, type TaskEntry } from './conversation';
import { Blocked, showBlocked, type Talos } from './talos';
import { label, message } from './text';

export const VIEW_ID = 'talos.conversation';
const FLUSH_MS = 40;
const ID = /^[A-Za-z0-9_-]{1,64}$/;

const PROPOSAL_COMMANDS: Record<string, string> = {
  diff: 'talos.showProposalDiff',
  apply: 'talos.applyProposal',
  reject: 'talos.rejectProposal',
  undo: 'talos.undoProposal',
};

/** One line for a toast: no line breaks, no icons, no links. */
function toastLine(text: string, max = 300): string {
  return message(label(text, max));
}

export class ConversationPanel implements vscode.WebviewViewProvider, vscode.Disposable {
  readonly model = new Conversation();
  private view: vscode.WebviewView | undefined;
  private ready = false;
  private full = true;
  private readonly dirty = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private pendingReveal: string | undefined;
  private wasRunning = false;
  private readonly listeners: vscode.Disposable[];

  constructor(private readonly extensionUri: vscode.Uri, private readonly talos: Talos) {
    this.listeners = [
      talos.onServerNotification(({ method, params }) => this.notification(method, params)),
      talos.onProposals((changed) => {
        for (const row of changed.proposals) {
          const checked = proposalRow(row);
          const id = checked && this.model.proposalChanged(checked);
          if (id) this.changed(id);
        }
      }),
      talos.onDidChange(() => {
        const running = talos.connection === 'running';
        if (this.wasRunning && !running) for (const id of this.model.serverLost()) this.changed(id);
        if (running !== this.wasRunning) this.changed();
        this.wasRunning = running;
      }),
    ];
  }

  // ------------------------------------------------------------- from the server
  private notification(method: string, params: unknown): void {
    if (method === 'talos/conversation') {
      const event = serverEvent(params);
      if (!event) {
        this.talos.log.warn('talos/conversation: an event that is not one was dropped');
        return;
      }
      const id = this.model.apply(event);
      this.changed(id);
      if (event.kind === 'end' && id) this.announceEnd(this.model.task(id)!);
    } else if (method === 'talos/prompt') {
      const row = promptRow(params);
      if (!row) {
        this.talos.log.warn('talos/prompt: a prompt that is not one was dropped');
        return;
      }
      this.changed(this.model.prompt(row));
      this.announcePrompt(this.model.findPrompt(row.prompt_id) ?? row);
    } else if (method === 'talos/promptClosed') {
      const id = (params as { prompt_id?: unknown } | null)?.prompt_id;
      if (typeof id === 'string') this.changed(this.model.close(id));
    }
  }

  // ------------------------------------------------------------------- toasts
  private get inView(): boolean {
    return !!this.view?.visible;
  }

  private announceEnd(task: TaskEntry): void {
    const text = doneMessage(task);
    if (!text || this.inView) return;
    const show = task.end?.state === 'done' ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
    void show(toastLine(text), 'Open').then((pick) => {
      if (pick === 'Open') void this.reveal(task.id);
    });
  }

  private announcePrompt(prompt: PromptRow): void {
    if (this.inView) return;
    const open: { title: string; index?: number } = { title: 'Open' };
    const text = toastLine(`Talos needs you: ${prompt.message}`);
    if (prompt.kind === 'permission') {
      // a permission prompt says what would run, where, with which rule: a modal keeps its lines
      const review = { title: 'Review…' };
      void vscode.window.showWarningMessage(text, review, open).then(async (pick) => {
        if (pick === review) await this.askModal(prompt);
        else if (pick === open) await this.reveal(prompt.task_id ?? undefined);
      });
      return;
    }
    const actions: { title: string; index?: number }[] = prompt.actions.map((title, index) => ({ title: message(label(title, 80)), index }));
    void vscode.window.showInformationMessage(text, ...actions, open).then(async (pick) => {
      if (pick === open) await this.reveal(prompt.task_id ?? undefined);
      else if (pick?.index !== undefined) await this.answer(prompt.prompt_id, pick.index);
    });
  }

  /** The prompt as a modal: its first line, then the rest on its lines; Cancel answers nothing. */
  private async askModal(prompt: PromptRow): Promise<void> {
    if (!this.model.findPrompt(prompt.prompt_id)) {
      vscode.window.setStatusBarMessage('Talos: that prompt is no longer open', 5000);
      return;
    }
    const { first, detail } = promptParts(prompt.message);
    const actions = prompt.actions.map((title, index) => ({ title: message(label(title, 80)), index }));
    const pick = await vscode.window.showWarningMessage(toastLine(first), { modal: true, detail: message(detail) }, ...actions);
    if (pick) await this.answer(prompt.prompt_id, pick.index);
  }

  // ----------------------------------------------------------------- actions
  private async answer(promptId: string, index: number): Promise<void> {
    const prompt = this.model.findPrompt(promptId);
    const choice = prompt?.actions[index];
    if (!prompt || choice === undefined) {
      vscode.window.setStatusBarMessage('Talos: that prompt is no longer open', 5000);
      return;
    }
    try {
      await this.talos.execute('talos.prompt.answer', { prompt_id: promptId, choice });
      this.changed(this.model.close(promptId, choice));
    } catch (error) {
      // answered elsewhere, timed out, or its task ended: it is gone either way
      this.changed(this.model.close(promptId));
      this.notice(`That prompt is no longer open: ${(error as Error).message}`);
    }
  }

  private async send(text: string): Promise<void> {
    const send = sendFor(this.model, text);
    if ('refused' in send) {
      this.notice(send.refused);
      return;
    }
    const argument: Record<string, unknown> = { ...send.argument };
    const editor = vscode.window.activeTextEditor;
    if (send.command === 'talos.task.start' && editor?.document.uri.scheme === 'file') argument.uri = editor.document.uri.toString();
    try {
      await this.talos.execute(send.command, argument);
      void this.view?.webview.postMessage({ type: 'sent' });
    } catch (error) {
      if (error instanceof Blocked) showBlocked(error); // with the way to the Remote settings
      this.notice(`Talos: ${(error as Error).message}`);
    }
  }

  private notice(text: string): void {
    void this.view?.webview.postMessage({ type: 'notice', text: label(text, 500) });
  }

  /** What the webview asks for, checked: only what the host knows of. */
  private async receive(raw: unknown): Promise<void> {
    if (typeof raw !== 'object' || raw === null) return;
    const m = raw as Record<string, unknown>;
    const id = typeof m.id === 'string' && ID.test(m.id) ? m.id : undefined;
    switch (m.type) {
      case 'ready':
        this.ready = true;
        this.full = true;
        this.flush();
        if (this.pendingReveal) {
          void this.view?.webview.postMessage({ type: 'reveal', id: this.pendingReveal });
          this.pendingReveal = undefined;
        }
        return;
      case 'send':
        if (typeof m.text === 'string') await this.send(m.text);
        return;
      case 'new':
        this.model.startAfresh();
        this.changed();
        return;
      case 'proposal': {
        const command = typeof m.action === 'string' ? PROPOSAL_COMMANDS[m.action] : undefined;
        const known = id && this.model.tasks.some((t) => t.proposals.some((p) => p.id === id));
        if (command && known) await vscode.commands.executeCommand(command, id);
        return;
      }
      case 'answer':
        if (typeof m.prompt_id === 'string' && typeof m.index === 'number' && Number.isInteger(m.index)) await this.answer(m.prompt_id, m.index);
        return;
      case 'task':
        if (!id || !this.model.task(id)) return;
        if (m.action === 'cancel') await vscode.commands.executeCommand('talos.cancelTask', id);
        else if (m.action === 'transcript') await vscode.commands.executeCommand('talos.showTranscript', id);
        return;
    }
  }

  // ---------------------------------------------------------------- drawing
  /** Reveals the panel, scrolled to `taskId` when given. */
  async reveal(taskId?: string): Promise<void> {
    await vscode.commands.executeCommand(`${VIEW_ID}.focus`);
    if (!taskId) return;
    if (this.view && this.ready) void this.view.webview.postMessage({ type: 'reveal', id: taskId });
    else this.pendingReveal = taskId;
  }

  newConversation(): void {
    this.model.startAfresh();
    this.changed();
  }

  private changed(taskId?: string): void {
    if (taskId) this.dirty.add(taskId);
    else this.full = true;
    if (this.timer || !this.view || !this.ready) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flush();
    }, FLUSH_MS);
  }

  private flush(): void {
    if (!this.view || !this.ready) return;
    const shown = this.model.shown;
    const tasks = this.full ? shown : shown.filter((t) => this.dirty.has(t.id));
    const latest = this.model.latest;
    void this.view.webview.postMessage({
      type: 'update',
      full: this.full,
      order: shown.map((t) => t.id),
      tasks,
      loose: this.model.loose,
      connection: this.talos.connection,
      composer: latest ? { follows: latest.title, running: !latest.end, id: latest.id } : null,
    });
    this.full = false;
    this.dirty.clear();
  }

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    this.ready = false;
    const media = vscode.Uri.joinPath(this.extensionUri, 'media');
    const dist = vscode.Uri.joinPath(this.extensionUri, 'dist');
    view.webview.options = { enableScripts: true, enableCommandUris: false, enableForms: false, localResourceRoots: [media, dist] };
    view.webview.html = page(view.webview.cspSource, view.webview.asWebviewUri(vscode.Uri.joinPath(media, 'conversation.css')).toString(), view.webview.asWebviewUri(vscode.Uri.joinPath(dist, 'conversation.js')).toString());
    const subscriptions = [
      view.webview.onDidReceiveMessage((m) => this.receive(m).catch((error) => this.notice(`Talos: ${(error as Error).message}`))),
      view.onDidChangeVisibility(() => {
        if (view.visible) this.changed();
      }),
    ];
    view.onDidDispose(() => {
      if (this.view === view) {
        this.view = undefined;
        this.ready = false;
      }
      for (const s of subscriptions) s.dispose();
    });
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const l of this.listeners) l.dispose();
  }
}
