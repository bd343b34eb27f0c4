/**
 * Talos for VS Code: the language client for `talos-ls`, plus what LSP lacks: the status bar,
 * a real diff editor for proposals, the palette, the Talos view, the key in SecretStorage.
 */
import * as vscode from 'vscode';
import { registerCommands } from './commands';
import { ConversationPanel, VIEW_ID } from './panel';
import { Documents, PROPOSAL_SCHEME, TASK_SCHEME, parseTaskPath, showing } from './documents';
import { statusBar } from './statusBar';
import { Talos } from './talos';
import { Overview } from './views';

/** Settings read only when the server starts: a change offers a restart. */
const AT_START = ['talos.server', 'talos.apiKeyEnv', 'talos.storeUrl'];

class Provider implements vscode.TextDocumentContentProvider {
  readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  constructor(private readonly provide: (path: string) => Promise<string>) {}
  provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    return this.provide(uri.path);
  }
}

let talos: Talos | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  talos = new Talos(context);
  const documents = new Documents((method, params) => talos!.request(method, params), (command, argument) => talos!.execute(command, argument));
  const proposals = new Provider((path) => documents.proposal(path));
  const transcripts = new Provider((path) => documents.transcript(path));
  const overview = new Overview(talos);
  const conversation = new ConversationPanel(context.extensionUri, talos);

  context.subscriptions.push(
    talos,
    overview,
    proposals.changed,
    transcripts.changed,
    vscode.workspace.registerTextDocumentContentProvider(PROPOSAL_SCHEME, proposals),
    vscode.workspace.registerTextDocumentContentProvider(TASK_SCHEME, transcripts),
    vscode.window.registerTreeDataProvider('talos.overview', overview),
    conversation,
    vscode.window.registerWebviewViewProvider(VIEW_ID, conversation, { webviewOptions: { retainContextWhenHidden: true } }),
    vscode.commands.registerCommand('talos.openConversation', () => conversation.reveal()),
    vscode.commands.registerCommand('talos.newConversation', () => conversation.newConversation()),
    vscode.commands.registerCommand('talos.refreshView', () => overview.refresh()),
    statusBar(talos),
    // A proposal partly applied or made stale: its open diff shows it as it is now.
    talos.onProposals((changed) => {
      const ids = new Set(changed.proposals.map((p) => p.id));
      const open = vscode.workspace.textDocuments.filter((d) => d.uri.scheme === PROPOSAL_SCHEME);
      const paths = showing(open.map((d) => d.uri.path), ids);
      for (const d of open) if (paths.includes(d.uri.path)) proposals.changed.fire(d.uri);
    }),
    // An open transcript of a running task follows it, to its end.
    talos.onDidChange(() => {
      const running = new Set((talos?.status?.running ?? []).map((t) => t.id));
      for (const d of vscode.workspace.textDocuments) {
        const id = d.uri.scheme === TASK_SCHEME ? parseTaskPath(d.uri.path) : undefined;
        if (id && (running.has(id) || wasRunning.has(id))) transcripts.changed.fire(d.uri);
      }
      wasRunning = running;
    }),
    // Trusting the workspace lets its .venv's talos-ls be found.
    vscode.workspace.onDidGrantWorkspaceTrust(async () => {
      if (talos?.connection === 'failed') await talos.restart();
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration('talos')) return;
      // An endpoint or key variable this remote window ignores stops Talos; applied, starts it.
      if (await talos?.blockingChanged()) return;
      if (AT_START.some((key) => event.affectsConfiguration(key))) {
        const pick = await vscode.window.showInformationMessage('Talos: this setting takes effect when the server restarts.', 'Restart Now');
        if (pick) await talos?.restart();
        return;
      }
      await talos?.configurationChanged();
    }),
  );
  registerCommands(context, talos);
  await talos.start();
}

let wasRunning = new Set<string>();

export async function deactivate(): Promise<void> {
  await talos?.stop();
  talos = undefined;
}
