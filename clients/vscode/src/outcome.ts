/**
 * What the person is told after applying, rejecting or undoing a proposal, from whichever
 * surface ran it: the palette, the diff editor's title, the conversation panel (all through
 * `commands.ts`), or a code lens or code action (the language client runs those server
 * commands itself; `Talos`'s middleware passes their results here). An Apply that does not
 * apply is never silent: the server answers `{applied: false, status}`, and the status says why.
 * Pure: no `vscode` here, so it is unit-tested.
 */
import { inline, label } from './text';

/** `talos.proposal.apply`'s answer. */
export interface ApplyResult {
  proposal_id?: string;
  applied: boolean;
  status: string;
}

/** `talos.undo`'s answer. */
export interface UndoResult {
  proposal_id: string;
  path: string;
  status?: string;
}

/**
 * `done`: it happened as asked (a status-bar message: the file shows it); `refused`: nothing
 * was written, and why (a warning the person must see).
 */
export interface Outcome {
  kind: 'done' | 'refused';
  text: string;
}

/** The server commands whose results are told (`review`), as lenses and code actions run them. */
export const REVIEW_COMMANDS = ['talos.proposal.apply', 'talos.proposal.reject', 'talos.undo'];

const ELSEWHERE = 'in another window, or another editor or `talos` command on this folder';

/** `hunks` as a person counts them: "change 1", "changes 1 and 3". */
function changes(hunks: readonly number[]): string {
  const numbers = hunks.map((h) => String(h + 1));
  if (numbers.length === 1) return `change ${numbers[0]}`;
  return `changes ${numbers.slice(0, -1).join(', ')} and ${numbers[numbers.length - 1]}`;
}

/** After `talos.proposal.apply {proposal_id, hunks?}`, with the file's path when it is known. */
export function applyOutcome(id: string, result: ApplyResult, hunks?: readonly number[], path?: string): Outcome {
  const pid = label(id, 64);
  const file = path ? label(path, 80) : 'its file';
  if (result.applied) {
    const what = hunks?.length ? `${changes(hunks)} of ${pid}` : pid;
    const rest = result.status === 'partly_applied' ? '; the rest is still to review' : '';
    return { kind: 'done', text: `Talos: applied ${what}${path ? ` to ${file}` : ''}${rest}` };
  }
  const not = `Talos: ${pid} was not applied`;
  const nothing = 'Nothing was written.';
  switch (result.status) {
    case 'stale':
      return { kind: 'refused', text: `${not}: ${file} changed since it was proposed, so it is stale. ${nothing} Reject it, or ask Talos to redo it on the file as it is.` };
    case 'rejected':
      return { kind: 'refused', text: `${not}: it was rejected meanwhile (${ELSEWHERE}). ${nothing}` };
    case 'applied':
      return { kind: 'refused', text: `${not} again: it was already applied (${ELSEWHERE}). ${nothing}` };
    case 'undone':
      return { kind: 'refused', text: `${not}: it was applied and then undone; it is not applied again. Ask Talos for it again if you want it.` };
    case 'partly_applied':
      return { kind: 'refused', text: `${not}: part of it was applied meanwhile, so the change you chose is no longer where it was shown. ${nothing} Its lenses show what is left.` };
    case 'pending':
      return { kind: 'refused', text: `${not}: the edit did not land (the file changed as it was written, or could not be written). ${nothing} Try again.` };
    default:
      return { kind: 'refused', text: `${not} (${label(result.status, 40)}). ${nothing}` };
  }
}

/** After `talos.undo`: the server puts the file back as it was before the proposal's FIRST application, or refuses. */
export function undoOutcome(result: UndoResult): Outcome {
  const pid = label(result.proposal_id, 64);
  return { kind: 'done', text: `Talos: undid ${pid}: ${label(result.path, 80)} is back as it was before ${pid} was applied` };
}

/** `talos.task.rewind`'s answer. */
export interface RewindResult {
  task_id: string;
  restored: string[];
  left: { path: string; reason: string }[];
}

/**
 * After `talos.task.rewind`: the files put back (a status-bar message), or, when the person
 * changed a file since the task did, every file left and why (a warning: it was not undone).
 */
export function rewindOutcome(result: RewindResult): Outcome {
  const task = label(result.task_id, 64);
  const restored = result.restored.length ? `restored ${result.restored.map((p) => label(p, 80)).join(', ')}` : 'no file restored';
  if (!result.left.length) return { kind: 'done', text: `Talos: undid task ${task}: ${restored}` };
  const left = result.left.map((l) => `${label(l.path, 80)} left as it is: ${inline(l.reason, 300)}`).join('; ');
  return { kind: 'refused', text: `Talos: task ${task} was undone only in part: ${restored}; ${left}` };
}

export function rejectOutcome(id: string): Outcome {
  return { kind: 'done', text: `Talos: rejected ${label(id, 64)}` };
}

/** A review command the server refused (an error answer), as the person reads it. */
export function failureOutcome(command: string, error: string): Outcome {
  const verb = command === 'talos.undo' ? 'undo' : command === 'talos.proposal.reject' ? 'reject' : 'apply';
  const why = inline(error.replace(/^Request workspace\/executeCommand failed(?: with message)?:?\s*/, ''), 400);
  return { kind: 'refused', text: `Talos: could not ${verb}: ${why}` };
}

/**
 * What a lens or code action's server command came to (`command` with its one object
 * `argument`, answered `result`), or nothing to tell.
 */
export function reviewOutcome(command: string, argument: unknown, result: unknown): Outcome | undefined {
  const arg = (argument && typeof argument === 'object' ? argument : {}) as { proposal_id?: unknown; hunks?: unknown };
  const res = (result && typeof result === 'object' ? result : undefined) as Record<string, unknown> | undefined;
  if (!res) return undefined;
  const id = typeof res.proposal_id === 'string' ? res.proposal_id : typeof arg.proposal_id === 'string' ? arg.proposal_id : '';
  if (command === 'talos.proposal.apply' && typeof res.applied === 'boolean') {
    const hunks = Array.isArray(arg.hunks) && arg.hunks.every((h) => Number.isInteger(h)) ? (arg.hunks as number[]) : undefined;
    return applyOutcome(id, { applied: res.applied, status: String(res.status ?? '') }, hunks);
  }
  if (command === 'talos.undo' && typeof res.path === 'string') return undoOutcome({ proposal_id: id, path: res.path });
  if (command === 'talos.proposal.reject' && id) return rejectOutcome(id);
  return undefined;
}
