/**
 * The connection to `talos-ls`: finds and starts it with the key from SecretStorage in its
 * environment, restarts it after a crash with back-off, checks settings before they are sent,
 * and keeps the latest `talos/status`. Everything else in the extension goes through here.
 */
import * as vscode from 'vscode';
import {
  type ApplyWorkspaceEditParams,
  type ApplyWorkspaceEditRequest,
  type ApplyWorkspaceEditResult,
  CancellationToken,
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorAction,
  LanguageClient,
  ShowMessageNotification,
  ShowMessageRequest,
  State,
  type LanguageClientOptions,
  type MessageActionItem,
  type ServerOptions,
} from 'vscode-languageclient/node';
import type { Readable } from 'node:stream';
import * as readline from 'node:readline';
import { Backoff, crashLoopMessage, findServer, notFoundMessage, serverEnv, startFailureMessage, StderrTail } from './launch';
import { failureOutcome, REVIEW_COMMANDS, reviewOutcome, type Outcome } from './outcome';
import { blockedMessage, checkSettings, effective, ignoredMessage, ignoredSettings, OPEN_REMOTE_SETTINGS, type Checked, type Ignored, type Layers } from './settings';
import type { Connection, ServerStatus } from './status';
import { inline, label, message } from './text';

export const SECRET_KEY = 'talos.apiKey';
/** What the conversation panel hears from the server. */
export const CONVERSATION_METHODS = ['talos/conversation', 'talos/prompt', 'talos/promptClosed'];

/** A task refused because a setting that decides where the key goes cannot be applied here. */
export class Blocked extends Error {}

/**
 * The language client, quiet: it notifies nothing itself (its start and connection errors
 * came as raw "write EPIPE" toasts, one per layer). Failures are told once, by `Talos`, with
 * their cause; everything still goes to the log.
 */
class QuietClient extends LanguageClient {
  override error(message: string, data?: unknown): void {
    super.error(message, data, false);
  }
}

/** Opens the Remote settings file (a remote window reads machine settings from it). */
export function openRemoteSettings(): Thenable<unknown> {
  return vscode.commands.executeCommand('workbench.action.openRemoteSettingsFile');
}

/** A refusal from `Talos.checkTasks`, shown with the button to the Remote settings. */
export function showBlocked(error: Blocked): void {
  void vscode.window.showErrorMessage(error.message, OPEN_REMOTE_SETTINGS).then((pick) => {
    if (pick) void openRemoteSettings();
  });
}

/** An outcome told: a status-bar message when it happened, a warning when nothing was written. */
export function tell(outcome: Outcome): void {
  if (outcome.kind === 'done') vscode.window.setStatusBarMessage(outcome.text, 6000);
  else void vscode.window.showWarningMessage(outcome.text);
}

export interface ProposalsChanged {
  uri: string;
  proposals: { id: string; path: string; status: string; task_id: string | null; hunks: number }[];
}

export class Talos implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly backoff = new Backoff();
  private notified = false;
  private lastProblems = '';
  /** The ignored settings last told about (`names` joined), so each set is told once. */
  private toldIgnored = '';
  /** Whether the current client has been running: a crash before that is a start failure. */
  private ran = false;
  private readonly stderr = new StderrTail();
  private stderrClosed: Promise<void> = Promise.resolve();
  /** Why Talos is not started (connection `blocked`), for the status bar. */
  blockedWhy: string | undefined;
  status: ServerStatus | undefined;
  connection: Connection = 'stopped';

  readonly log: vscode.LogOutputChannel;
  private readonly statusEmitter = new vscode.EventEmitter<void>();
  private readonly proposalsEmitter = new vscode.EventEmitter<ProposalsChanged>();
  /** The status or the connection changed. */
  readonly onDidChange = this.statusEmitter.event;
  /** A file's proposals were made or changed state. */
  readonly onProposals = this.proposalsEmitter.event;
  private readonly serverEmitter = new vscode.EventEmitter<{ method: string; params: unknown }>();
  /** The conversation's notifications (`CONVERSATION_METHODS`), for the panel. */
  readonly onServerNotification = this.serverEmitter.event;
  /** Set by the extension: how to show a proposal as a diff (the server's "Show diff"). */
  showDiff: (proposalId: string) => Promise<void> = async () => undefined;

  constructor(private readonly context: vscode.ExtensionContext) {
    this.log = vscode.window.createOutputChannel('Talos', { log: true });
  }

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  /** One server command with one object argument (the server's convention). */
  async execute<T = unknown>(command: string, argument: object = {}): Promise<T> {
    const client = await this.ready();
    return (await client.sendRequest('workspace/executeCommand', { command, arguments: [argument] })) as T;
  }

  async request<T = unknown>(method: string, params: object): Promise<T> {
    const client = await this.ready();
    return (await client.sendRequest(method, params)) as T;
  }

  /** A remote window: VS Code applies machine settings from Remote settings only. */
  get remote(): boolean {
    return vscode.env.remoteName !== undefined;
  }

  private layers(key: string): Layers | undefined {
    return vscode.workspace.getConfiguration('talos').inspect(key);
  }

  /** The user-only settings this window does not apply (none in a local window). */
  ignored(): Ignored {
    return ignoredSettings((key) => this.layers(key), this.remote);
  }

  /** Refuses (with the reason and the way out) while no task may start. */
  checkTasks(): void {
    if (this.connection !== 'blocked') return;
    const ignored = this.ignored();
    throw new Blocked(blockedMessage(ignored.blocking.length ? ignored : { names: ['talos.baseUrl'], blocking: ['talos.baseUrl'] }));
  }

  private async ready(): Promise<LanguageClient> {
    this.checkTasks();
    if (!this.client || this.connection === 'failed' || this.connection === 'stopped') {
      throw new Error('the Talos language server is not running (Talos: Restart)');
    }
    if (this.client.state !== State.Running) await this.client.start();
    return this.client;
  }

  /** The settings as they are now, checked; problems are shown once per new set. */
  settings(): Checked {
    const config = vscode.workspace.getConfiguration('talos');
    const checked = checkSettings((key) => effective(key, config.inspect(key), this.remote));
    const problems = checked.problems.join('\n');
    if (problems && problems !== this.lastProblems) {
      void vscode.window.showWarningMessage(`Talos settings refused (the server keeps its last good value): ${checked.problems.join('; ')}`, 'Open Settings').then((pick) => {
        if (pick) void vscode.commands.executeCommand('workbench.action.openSettings', 'talos');
      });
    }
    this.lastProblems = problems;
    return checked;
  }

  /**
   * After a change of `talos.*`: a setting that decides where the key goes, now ignored by this
   * window, stops the server; now applied, starts it. True if it did either (or Talos stays
   * blocked), so the caller does nothing more.
   */
  async blockingChanged(): Promise<boolean> {
    const ignored = this.ignored();
    if (this.connection === 'blocked') {
      if (ignored.blocking.length) {
        this.tellIgnored(ignored, true);
        return true;
      }
      this.blockedWhy = undefined;
      this.notified = false;
      await this.start();
      return true;
    }
    if (!ignored.blocking.length) return false;
    await this.stop();
    await this.start();
    return true;
  }

  /** Sends the current settings (after a change of `talos.*`). */
  async configurationChanged(): Promise<void> {
    this.tellIgnored(this.ignored(), false);
    const checked = this.settings();
    if (this.client?.state === State.Running) {
      await this.client.sendNotification(DidChangeConfigurationNotification.type, { settings: { talos: checked.settings } });
    }
  }

  async start(): Promise<void> {
    // Where the key goes is the person's: with their endpoint or key variable ignored by this
    // remote window, nothing starts (the default endpoint would get the code and the key).
    const ignored = this.ignored();
    if (ignored.blocking.length) {
      this.blockedWhy = ignoredMessage(ignored, this.where());
      this.log.error(this.blockedWhy);
      this.setConnection('blocked');
      this.tellIgnored(ignored, true);
      return;
    }
    this.blockedWhy = undefined;
    // A workspace's own .venv is a program the repository chose: used only once it is trusted.
    const folders = vscode.workspace.isTrusted ? (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath) : [];
    const config = vscode.workspace.getConfiguration('talos');
    const command = effective('server.command', config.inspect('server.command'), this.remote);
    const envPath = process.env.PATH ?? '';
    const found = findServer(typeof command === 'string' ? command : '', folders, envPath);
    if (!found.command) {
      this.setConnection('failed');
      const why = notFoundMessage(found.tried, envPath, this.remote);
      this.log.error(why);
      this.notifyFailure(why, ignored);
      return;
    }
    const checked = this.settings();
    const secret = await this.context.secrets.get(SECRET_KEY);
    this.stderr.reset(secret ? [secret] : []);
    this.ran = false;
    const serverOptions: ServerOptions = {
      command: found.command,
      args: (effective('server.args', config.inspect('server.args'), this.remote) as string[] | undefined) ?? [],
      // No `transport`: with TransportKind.stdio the client appends `--stdio`, which talos-ls
      // (stdio by default) refuses.
      options: { env: serverEnv(process.env, checked.settings.apiKeyEnv, secret), cwd: folders[0] },
    };
    const client = new QuietClient('talos', 'Talos', serverOptions, this.clientOptions(checked));
    this.client = client;
    this.handleMessages(client);
    client.onNotification('talos/status', (status: ServerStatus) => {
      this.status = status;
      this.statusEmitter.fire();
    });
    client.onNotification('talos/proposals', (params: ProposalsChanged) => this.proposalsEmitter.fire(params));
    for (const method of CONVERSATION_METHODS) client.onNotification(method, (params: unknown) => this.serverEmitter.fire({ method, params }));
    client.onDidChangeState((e) => {
      if (this.client !== client) return;
      if (e.newState === State.Running) {
        this.notified = false;
        this.ran = true;
        this.setConnection('running');
        this.tellIgnored(ignored, false);
        void this.refreshStatus();
      } else if (e.newState === State.Starting) {
        this.setConnection('starting');
      }
    });
    this.log.info(`starting ${found.command}`);
    this.setConnection('starting');
    try {
      await client.start();
    } catch (error) {
      if (this.client !== client) return;
      this.setConnection('failed');
      // Its stderr, which says why, may still be on its way: wait for the pipe to close.
      await Promise.race([this.stderrClosed, new Promise((resolve) => setTimeout(resolve, 2000))]);
      if (this.client !== client) return;
      this.log.error(`talos-ls (${found.command}) stopped as it started: ${(error as Error).message}`);
      this.notifyFailure(startFailureMessage(found.command, this.stderr.last(3), (error as Error).message, this.remote), ignored);
    }
  }

  /** The remote window's name, for a message ("ssh-remote", "wsl", "dev-container", ...). */
  private where(): string {
    return inline(vscode.env.remoteName ?? 'remote', 80);
  }

  /**
   * Settings this remote window ignores, told once per set (a restart tells again), with the
   * button to the Remote settings file. `blocking`: as an error, Talos is not started.
   */
  private tellIgnored(ignored: Ignored, blocking: boolean): void {
    const names = ignored.names.join(',');
    if (names === this.toldIgnored) return;
    this.toldIgnored = names;
    if (!names) return;
    const text = ignoredMessage(ignored, this.where());
    if (!blocking) this.log.warn(text);
    const show = blocking ? vscode.window.showErrorMessage : vscode.window.showWarningMessage;
    void show(text, OPEN_REMOTE_SETTINGS).then((pick) => {
      if (pick) void openRemoteSettings();
    });
  }

  /** Each line the server writes on stderr goes to the log and the tail kept for its failure. */
  private pipeStderr(input: Readable, channel: vscode.LogOutputChannel): void {
    this.stderr.reset();
    const lines = readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 });
    this.stderrClosed = new Promise((resolve) => lines.on('close', () => resolve()));
    lines.on('line', (line) => {
      channel.error(line);
      this.stderr.push(line);
    });
  }

  /** Stops the server and starts it again: a new process with the current key and settings. */
  async restart(): Promise<void> {
    this.backoff.reset();
    this.notified = false;
    this.toldIgnored = '';
    await this.stop();
    await this.start();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.status = undefined;
    this.setConnection('stopped');
    if (client) {
      try {
        await client.dispose(3000);
      } catch (error) {
        this.log.warn(`the server did not stop cleanly: ${(error as Error).message}`);
      }
    }
  }

  async refreshStatus(): Promise<void> {
    try {
      this.status = await this.execute<ServerStatus>('talos.status');
      this.statusEmitter.fire();
    } catch (error) {
      this.log.warn(`talos.status: ${(error as Error).message}`);
    }
  }

  dispose(): void {
    void this.stop();
    this.statusEmitter.dispose();
    this.proposalsEmitter.dispose();
    this.serverEmitter.dispose();
    this.log.dispose();
  }

  private setConnection(connection: Connection): void {
    this.connection = connection;
    void vscode.commands.executeCommand('setContext', 'talos.running', connection === 'running');
    this.statusEmitter.fire();
  }

  /**
   * One notification per failure to start (not one per retry), with the way out: the log, and
   * the settings where this window reads the server command. Settings this window ignores are
   * told in the same notification.
   */
  private notifyFailure(text: string, ignored?: Ignored): void {
    if (this.notified) return;
    this.notified = true;
    let shown = text;
    if (ignored?.names.length && ignored.names.join(',') !== this.toldIgnored) {
      this.toldIgnored = ignored.names.join(',');
      shown += ` Also: ${ignoredMessage(ignored, this.where()).replace(/^Talos: /, '')}`;
    }
    void vscode.window.showErrorMessage(shown, 'Show Log', 'Open Settings').then((pick) => {
      if (pick === 'Show Log') this.log.show();
      else if (pick === 'Open Settings') void this.openServerSettings();
    });
  }

  private openServerSettings(): Thenable<unknown> {
    return this.remote
      ? vscode.commands.executeCommand('workbench.action.openRemoteSettings', { query: 'talos.server' })
      : vscode.commands.executeCommand('workbench.action.openSettings', 'talos.server');
  }

  private clientOptions(checked: Checked): LanguageClientOptions {
    return {
      documentSelector: [{ scheme: 'file' }],
      outputChannel: this.log,
      revealOutputChannelOn: 4, // never: failures are notified once, by us
      // No raw toast of the initialize error ("write EPIPE"): start() tells it, with stderr.
      initializationFailedHandler: () => false,
      stdioOptions: {
        stdout: (input, channel) => readline.createInterface({ input, crlfDelay: Infinity }).on('line', (line) => channel.info(line)),
        stderr: (input, channel) => this.pipeStderr(input, channel),
      },
      // prompts as talos/prompt (answered from the panel or a toast, whenever the person
      // likes) and each task's events as talos/conversation (the server then sends no end toast)
      initializationOptions: { ...checked.settings, contentProvider: true, deferredPrompts: true, conversation: true },
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue, handled: true }),
        closed: () => this.closed(),
      },
      middleware: {
        workspace: {
          // The server pulls the `talos` section: it gets the checked settings, never the
          // client's own keys (server.command) nor a refused value.
          configuration: async (params, token, next) => {
            const values = await next(params, token);
            if (!Array.isArray(values)) return values;
            return values.map((value, i) => (params.items[i]?.section === 'talos' ? this.settings().settings : value));
          },
          handleApplyEdit: async (params, next) => this.applyAndSave(params, next),
        },
        // Titles and progress texts carry the model's or a linter's words: no icons, no links.
        provideCodeLenses: async (document, token, next) => {
          const lenses = await next(document, token);
          for (const lens of lenses ?? []) if (lens.command) lens.command.title = label(lens.command.title, 200);
          return lenses;
        },
        provideCodeActions: async (document, range, context, token, next) => {
          const actions = await next(document, range, context, token);
          for (const action of actions ?? []) action.title = label(action.title, 200);
          return actions;
        },
        handleWorkDoneProgress: (token, params, next) => {
          if ('title' in params && typeof params.title === 'string') params.title = label(params.title, 200);
          if (typeof params.message === 'string') params.message = label(params.message, 300);
          next(token, params);
        },
        executeCommand: async (command, args, next) => {
          if (command === 'talos.proposal.diff') {
            const id = (args[0] as { proposal_id?: unknown } | undefined)?.proposal_id;
            if (typeof id === 'string') return this.showDiff(id);
          }
          if (REVIEW_COMMANDS.includes(command)) return this.review(command, args, next);
          return next(command, args);
        },
        window: {
          showDocument: async (params, token, next) => {
            const match = /^talos-proposal:\/([A-Za-z0-9_-]+)\.diff$/.exec(params.uri);
            if (match) {
              await this.showDiff(match[1]);
              return { success: true };
            }
            return next(params, token);
          },
        },
      },
    };
  }

  /**
   * A lens's or code action's Apply, Reject or Undo (the language client runs the server's
   * command itself): its result is told, so an Apply the server refuses (the proposal went
   * stale, or was rejected or applied in another window) is never silent; a refusal answered
   * as an error is told as a warning in the same words, not as the workbench's raw error.
   */
  private async review(command: string, args: unknown[], next: (command: string, args: unknown[]) => unknown): Promise<unknown> {
    let result: unknown;
    try {
      result = await next(command, args);
    } catch (error) {
      tell(failureOutcome(command, (error as Error).message ?? String(error)));
      return undefined;
    }
    const outcome = reviewOutcome(command, args[0], result);
    if (outcome) tell(outcome);
    return result;
  }

  /**
   * A proposal's edit applied to an open document is saved when the document had no unsaved
   * changes before: "Apply" writes the file, as it does for a file that is not open. A
   * document the person was editing stays unsaved.
   */
  private async applyAndSave(params: ApplyWorkspaceEditParams, next: ApplyWorkspaceEditRequest.HandlerSignature): Promise<ApplyWorkspaceEditResult> {
    const uris = (params.edit.documentChanges ?? []).flatMap((c) => ('textDocument' in c ? [c.textDocument.uri] : []));
    const clean = vscode.workspace.textDocuments.filter((d) => uris.includes(d.uri.toString()) && !d.isDirty);
    const result = (await next(params, CancellationToken.None)) as ApplyWorkspaceEditResult;
    if (result?.applied) {
      for (const document of clean) {
        if (document.isDirty) await document.save();
      }
    }
    return result;
  }

  /** The server's messages and prompts, with links broken and hidden characters shown. */
  private handleMessages(client: LanguageClient): void {
    client.onNotification(ShowMessageNotification.type, (params) => {
      const text = message(params.message);
      if (params.type === 1) void vscode.window.showErrorMessage(text);
      else if (params.type === 2) void vscode.window.showWarningMessage(text);
      else void vscode.window.showInformationMessage(text);
    });
    client.onRequest(ShowMessageRequest.type, async (params) => {
      const actions = params.actions ?? [];
      const shown = actions.map((a) => ({ title: message(a.title), original: a }));
      const show = params.type === 1 ? vscode.window.showErrorMessage : params.type === 2 ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
      const pick = await show(message(params.message), ...shown.map((s) => ({ title: s.title })));
      const chosen: MessageActionItem | null = pick ? (shown.find((s) => s.title === pick.title)?.original ?? null) : null;
      return chosen;
    });
  }

  /**
   * After a crash: restart with back-off, or give up and say so once. A server that never
   * answered is not restarted: it would die the same way; start() tells why, once.
   */
  private async closed(): Promise<{ action: CloseAction; handled: boolean }> {
    const client = this.client;
    if (!this.ran) return { action: CloseAction.DoNotRestart, handled: true };
    const delay = this.backoff.crashed(Date.now());
    if (delay === undefined) {
      this.setConnection('failed');
      await Promise.race([this.stderrClosed, new Promise((resolve) => setTimeout(resolve, 2000))]);
      const why = crashLoopMessage(this.stderr.last(3));
      this.log.error(why);
      this.notifyFailure(why);
      return { action: CloseAction.DoNotRestart, handled: true };
    }
    this.log.warn(`the language server stopped; restarting in ${delay / 1000} s`);
    this.setConnection('starting');
    await new Promise((resolve) => setTimeout(resolve, delay));
    if (this.client !== client) return { action: CloseAction.DoNotRestart, handled: true };
    return { action: CloseAction.Restart, handled: true };
  }
}
