/**
 * The palette commands: each asks for what it needs (an input box, a quick pick) and runs one
 * server command. Text from the server is shown with `label()`; results the person should
 * know about (an apply refused, a question not counted) are said plainly.
 */
import * as vscode from 'vscode';
import { PROPOSAL_SCHEME, TASK_SCHEME, parseProposalPath, proposalPath, taskPath } from './documents';
import { dollars, statusView } from './status';
import { applyOutcome, rejectOutcome, rewindOutcome, undoOutcome, type ApplyResult, type RewindResult, type UndoResult } from './outcome';
import { Blocked, SECRET_KEY, showBlocked, tell, type Talos } from './talos';
import { label, message } from './text';
import { answerable, idOf, type ProposalInfo, type QuestionInfo, type TaskInfo } from './views';

const OPEN_STATUSES = ['pending', 'partly_applied'];
const REVIEWABLE = [...OPEN_STATUSES, 'stale'];

type Range = { start: { line: number; character: number }; end: { line: number; character: number } };

function lspRange(range: vscode.Range): Range {
  return { start: { line: range.start.line, character: range.start.character }, end: { line: range.end.line, character: range.end.character } };
}

async function guarded(run: () => Promise<unknown>): Promise<void> {
  try {
    await run();
  } catch (error) {
    if (error instanceof Blocked) showBlocked(error);
    else void vscode.window.showErrorMessage(message(`Talos: ${(error as Error).message}`));
  }
}

export function registerCommands(context: vscode.ExtensionContext, talos: Talos): void {
  const register = (name: string, run: (...args: unknown[]) => Promise<unknown>): void => {
    context.subscriptions.push(vscode.commands.registerCommand(name, (...args: unknown[]) => guarded(() => run(...args))));
  };

  // ---------------------------------------------------------------- tasks
  const startTask = async (prompt: string, withSelection: boolean, diagnostics?: vscode.Diagnostic[]): Promise<void> => {
    const editor = vscode.window.activeTextEditor;
    const argument: Record<string, unknown> = { prompt };
    if (editor && editor.document.uri.scheme === 'file') {
      argument.uri = editor.document.uri.toString();
      if (withSelection && !editor.selection.isEmpty) argument.range = lspRange(editor.selection);
      if (diagnostics?.length) {
        argument.range = lspRange(diagnostics.map((d) => d.range).reduce((a, b) => a.union(b)));
        argument.diagnostics = diagnostics.map((d) => ({ message: d.message, source: d.source ?? '' }));
      }
    }
    const started = await talos.execute<{ task_id: string; state: string }>('talos.task.start', argument);
    vscode.window.setStatusBarMessage(`Talos: task ${started.task_id} ${started.state}`, 4000);
  };

  register('talos.startTask', async () => {
    talos.checkTasks(); // refused before the person types a prompt
    const editor = vscode.window.activeTextEditor;
    const selected = editor && !editor.selection.isEmpty;
    const prompt = await vscode.window.showInputBox({
      title: 'Talos: Start Task',
      prompt: selected ? 'What should Talos do? (the selection goes with it)' : 'What should Talos do?',
      placeHolder: 'e.g. make the failing test pass',
      ignoreFocusOut: true,
      validateInput: (v) => (v.length > 20000 ? 'At most 20,000 characters' : undefined),
    });
    if (prompt?.trim()) await startTask(prompt.trim(), true);
  });

  register('talos.askAboutSelection', async () => {
    talos.checkTasks();
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.selection.isEmpty) {
      void vscode.window.showInformationMessage('Talos: select some code first.');
      return;
    }
    const prompt = await vscode.window.showInputBox({ title: 'Talos: Ask About Selection', prompt: 'Your question about the selected code', value: 'Explain this code', ignoreFocusOut: true });
    if (prompt?.trim()) await startTask(prompt.trim(), true);
  });

  register('talos.fixDiagnostics', async () => {
    talos.checkTasks();
    const editor = vscode.window.activeTextEditor;
    if (!editor) return;
    const where = editor.selection.isEmpty ? new vscode.Range(editor.selection.active.line, 0, editor.selection.active.line + 1, 0) : editor.selection;
    const diagnostics = vscode.languages.getDiagnostics(editor.document.uri).filter((d) => d.source !== 'talos' && d.range.intersection(where));
    if (!diagnostics.length) {
      void vscode.window.showInformationMessage('Talos: no problems here to fix.');
      return;
    }
    await startTask(`Fix: ${diagnostics.map((d) => d.message).join('; ').slice(0, 2000)}`, false, diagnostics);
  });

  const pickTask = async (filter: (t: TaskInfo) => boolean, title: string): Promise<TaskInfo | undefined> => {
    const tasks = (await talos.execute<TaskInfo[]>('talos.task.list')).filter(filter);
    if (!tasks.length) {
      void vscode.window.showInformationMessage('Talos: no tasks.');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      tasks.map((task) => ({ label: label(task.title, 100), description: `${task.state} · ${dollars(task.cost)}`, detail: label(task.error ?? task.step ?? '', 200) || undefined, task })),
      { title, matchOnDescription: true },
    );
    return pick?.task;
  };

  register('talos.showTasks', async () => {
    const task = await pickTask(() => true, 'Talos: Tasks');
    if (!task) return;
    const running = task.state === 'running' || task.state === 'queued';
    const actions = ['Open Transcript', running ? 'Cancel Task' : 'Undo Task'];
    const action = await vscode.window.showQuickPick(actions, { title: label(task.title, 100) });
    if (action === 'Open Transcript') await openTranscript(task.id);
    else if (action === 'Cancel Task') await talos.execute('talos.task.cancel', { task_id: task.id });
    else if (action === 'Undo Task') await vscode.commands.executeCommand('talos.undoTask', task.id);
  });

  register('talos.cancelTask', async (arg) => {
    const id = idOf(arg, 'task') ?? (await pickTask((t) => t.state === 'running' || t.state === 'queued', 'Talos: Cancel Task'))?.id;
    if (id) await talos.execute('talos.task.cancel', { task_id: id });
  });

  // Every file a finished task changed, back as it was before it (`talos.task.rewind`).
  register('talos.undoTask', async (arg) => {
    const id = idOf(arg, 'task') ?? (await pickTask((t) => t.state !== 'running' && t.state !== 'queued', 'Talos: Undo Task'))?.id;
    if (id) tell(rewindOutcome(await talos.execute<RewindResult>('talos.task.rewind', { task_id: id })));
  });

  const openTranscript = async (taskId: string): Promise<void> => {
    const document = await vscode.workspace.openTextDocument(vscode.Uri.from({ scheme: TASK_SCHEME, path: taskPath(taskId) }));
    await vscode.window.showTextDocument(document, { preview: true });
  };
  register('talos.showTranscript', async (arg) => {
    const id = idOf(arg, 'task') ?? (await pickTask(() => true, 'Talos: Open Transcript'))?.id;
    if (id) await openTranscript(id);
  });

  // ------------------------------------------------------------ proposals
  /** The proposal a command is about: its argument, the diff being shown, or a pick. */
  const proposalFor = async (arg: unknown, title: string, statuses = REVIEWABLE): Promise<ProposalInfo | undefined> => {
    const proposals = (await talos.execute<ProposalInfo[]>('talos.proposal.list')).filter((p) => statuses.includes(p.status));
    let id = idOf(arg, 'proposal');
    if (!id && arg instanceof vscode.Uri && arg.scheme === PROPOSAL_SCHEME) id = parseProposalPath(arg.path)?.id;
    const active = vscode.window.activeTextEditor?.document.uri;
    if (!id && active?.scheme === PROPOSAL_SCHEME) id = parseProposalPath(active.path)?.id;
    if (id) {
      const found = proposals.find((p) => p.id === id);
      if (!found) void vscode.window.showInformationMessage(`Talos: proposal ${label(id, 64)} is no longer open for review.`);
      return found;
    }
    let candidates = proposals;
    if (active?.scheme === 'file') {
      const here = proposals.filter((p) => active.path.endsWith(`/${p.path}`));
      if (here.length) candidates = here;
    }
    if (!candidates.length) {
      void vscode.window.showInformationMessage('Talos: no proposals to review.');
      return undefined;
    }
    if (candidates.length === 1) return candidates[0];
    const pick = await vscode.window.showQuickPick(
      candidates.map((p) => ({ label: label(p.path, 100), description: `${p.id} · ${p.hunks} change${p.hunks === 1 ? '' : 's'} · ${p.status}`, proposal: p })),
      { title },
    );
    return pick?.proposal;
  };

  const showDiff = async (proposal: ProposalInfo): Promise<void> => {
    const side = (s: 'base' | 'proposed') => vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: proposalPath(proposal.id, s, proposal.path) });
    await vscode.commands.executeCommand('vscode.diff', side('base'), side('proposed'), `${label(proposal.path, 80)} ↔ Talos proposal ${proposal.id}`, { preview: true });
  };
  talos.showDiff = async (id) => {
    const proposal = await proposalFor(id, 'Talos: Show Proposal Diff', [...REVIEWABLE, 'applied', 'rejected', 'undone']);
    if (proposal) await showDiff(proposal);
  };

  /** Closes the diff tabs of a proposal that was applied or rejected. */
  const closeDiffs = async (id: string): Promise<void> => {
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((tab) => tab.input instanceof vscode.TabInputTextDiff
      && tab.input.modified.scheme === PROPOSAL_SCHEME && parseProposalPath(tab.input.modified.path)?.id === id);
    if (tabs.length) await vscode.window.tabGroups.close(tabs);
  };

  register('talos.showProposals', async () => {
    const proposals = (await talos.execute<ProposalInfo[]>('talos.proposal.list')).filter((p) => REVIEWABLE.includes(p.status));
    if (!proposals.length) {
      void vscode.window.showInformationMessage('Talos: no proposals to review.');
      return;
    }
    const pick = await vscode.window.showQuickPick(
      proposals.map((p) => ({ label: label(p.path, 100), description: `${p.id} · ${p.hunks} change${p.hunks === 1 ? '' : 's'} · ${p.status}`, proposal: p })),
      { title: 'Talos: Proposals' },
    );
    if (!pick) return;
    const open = OPEN_STATUSES.includes(pick.proposal.status);
    const action = await vscode.window.showQuickPick([...(open ? ['Apply'] : []), 'Show Diff', 'Reject'], { title: `${label(pick.proposal.path, 80)} (${pick.proposal.id})` });
    const commands: Record<string, string> = { Apply: 'talos.applyProposal', 'Show Diff': 'talos.showProposalDiff', Reject: 'talos.rejectProposal' };
    if (action) await vscode.commands.executeCommand(commands[action], pick.proposal.id);
  });

  register('talos.showProposalDiff', async (arg) => {
    const proposal = await proposalFor(arg, 'Talos: Show Proposal Diff');
    if (proposal) await showDiff(proposal);
  });

  register('talos.applyProposal', async (arg) => {
    const proposal = await proposalFor(arg, 'Talos: Apply Proposal', OPEN_STATUSES);
    if (!proposal) return;
    const result = await talos.execute<ApplyResult>('talos.proposal.apply', { proposal_id: proposal.id });
    if (result.applied) await closeDiffs(proposal.id);
    tell(applyOutcome(proposal.id, result, undefined, proposal.path));
  });

  register('talos.rejectProposal', async (arg) => {
    const proposal = await proposalFor(arg, 'Talos: Reject Proposal');
    if (!proposal) return;
    await talos.execute('talos.proposal.reject', { proposal_id: proposal.id });
    await closeDiffs(proposal.id);
    tell(rejectOutcome(proposal.id));
  });

  register('talos.undoProposal', async (arg) => {
    const id = idOf(arg, 'proposal');
    const active = vscode.window.activeTextEditor?.document.uri;
    const argument = id ? { proposal_id: id } : active?.scheme === 'file' ? { uri: active.toString() } : {};
    const result = await talos.execute<UndoResult>('talos.undo', argument);
    tell(undoOutcome(result));
  });

  // ------------------------------------------------------------ questions
  const answer = async (question: QuestionInfo): Promise<void> => {
    const pick = await vscode.window.showQuickPick(
      [...question.options.map((o) => ({ label: label(o, 100), option: o as string | undefined })), { label: 'Not now', description: 'not an answer: asked again later', option: undefined }],
      { title: label(question.question, 200), ignoreFocusOut: true },
    );
    if (!pick?.option) return;
    const result = await talos.execute<{ applied: boolean; reason: string }>('talos.question.answer', { candidate_id: question.candidate_id, answer: pick.option });
    if (result.applied) vscode.window.setStatusBarMessage('Talos: answer recorded', 4000);
    else void vscode.window.showWarningMessage(`Talos: the answer was not counted: ${label(result.reason, 300)}`);
  };

  register('talos.showQuestions', async () => {
    const questions = await answerable(talos);
    if (!questions.length) {
      void vscode.window.showInformationMessage('Talos: no open questions.');
      return;
    }
    const pick = await vscode.window.showQuickPick(questions.map((q) => ({ label: label(q.question, 120), description: q.options.map((o) => label(o, 30)).join(' / '), question: q })), { title: 'Talos: Open Questions' });
    if (pick) await answer(pick.question);
  });

  register('talos.answerQuestion', async (arg) => {
    const id = idOf(arg, 'question');
    const question = (await answerable(talos)).find((q) => q.candidate_id === id);
    if (question) await answer(question);
    else void vscode.window.showInformationMessage('Talos: that question is no longer open.');
  });

  // --------------------------------------------------------------- memory
  type Fact = { key: string; statement: string; confidence: number; source: string };
  const folderUri = (): object => {
    const active = vscode.window.activeTextEditor?.document.uri;
    return active?.scheme === 'file' ? { uri: active.toString() } : {};
  };
  const pickFact = async (title: string): Promise<Fact | undefined> => {
    const facts = await talos.execute<Fact[]>('talos.memory.list', folderUri());
    if (!facts.length) {
      void vscode.window.showInformationMessage('Talos: no facts stored for this folder yet.');
      return undefined;
    }
    const pick = await vscode.window.showQuickPick(
      facts.map((f) => ({ label: label(f.statement, 120), description: `confidence ${f.confidence.toFixed(2)} · ${label(f.source, 40)}`, fact: f })),
      { title, matchOnDescription: true },
    );
    return pick?.fact;
  };

  const forget = async (fact: Fact): Promise<void> => {
    const sure = await vscode.window.showWarningMessage(`Forget "${label(fact.statement, 200)}"?`, { modal: true }, 'Forget');
    if (sure !== 'Forget') return;
    await talos.execute('talos.memory.forget', { key: fact.key, ...folderUri() });
    vscode.window.setStatusBarMessage('Talos: forgotten', 4000);
  };

  register('talos.showMemory', async () => {
    const fact = await pickFact('Talos: Memory (choose a fact to forget it)');
    if (fact) await forget(fact);
  });
  register('talos.forgetFact', async () => {
    const fact = await pickFact('Talos: Forget Fact');
    if (fact) await forget(fact);
  });
  register('talos.rememberFact', async () => {
    const statement = await vscode.window.showInputBox({ title: 'Talos: Remember', prompt: 'A fact about this project, e.g. "Tests use pytest"', ignoreFocusOut: true });
    if (!statement?.trim()) return;
    const result = await talos.execute<{ outcome: string }>('talos.memory.remember', { statement: statement.trim(), ...folderUri() });
    vscode.window.setStatusBarMessage(`Talos: remembered (${label(result.outcome, 60)})`, 4000);
  });

  // --------------------------------------------------- server and the key
  register('talos.showStatus', async () => {
    await talos.refreshStatus();
    const view = statusView(talos.status, talos.connection, talos.blockedWhy);
    await vscode.window.showInformationMessage('Talos status', { modal: true, detail: view.tooltip.replace(/\n\nClick for tasks\.$/, '') });
  });
  register('talos.restart', () => talos.restart());
  register('talos.showLog', async () => talos.log.show());
  register('talos.setApiKey', async () => {
    const env = talos.settings().settings.apiKeyEnv ?? 'OPENAI_API_KEY';
    const key = await vscode.window.showInputBox({
      title: 'Talos: Set API Key',
      prompt: `Kept in the OS keychain (VS Code SecretStorage) and given to talos-ls as $${env}; never written to settings or logs.`,
      password: true,
      ignoreFocusOut: true,
      validateInput: (v) => (/\s/.test(v.trim()) || !v.trim() ? 'A key is one word without spaces' : undefined),
    });
    if (!key?.trim()) return;
    await context.secrets.store(SECRET_KEY, key.trim());
    await talos.restart();
    vscode.window.setStatusBarMessage('Talos: API key saved; the server was restarted with it', 5000);
  });
  register('talos.clearApiKey', async () => {
    await context.secrets.delete(SECRET_KEY);
    await talos.restart();
    vscode.window.setStatusBarMessage('Talos: API key removed', 5000);
  });
}
