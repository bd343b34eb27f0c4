/**
 * Read-only documents served from the server: a proposal's two sides and its diff
 * (`talos-proposal:`), and a task's transcript (`talos-task:`). The URI names the proposal or
 * task and what to show; the text comes from `talos/proposalContent` or `talos.task.show`.
 * Pure (no `vscode` import) so it is unit-tested; extension.ts registers it as a
 * TextDocumentContentProvider.
 */

export const PROPOSAL_SCHEME = 'talos-proposal';
export const TASK_SCHEME = 'talos-task';
export type Side = 'base' | 'proposed' | 'diff';

/** Ids are the server's (`p…`, `t…`); anything else in a URI is refused, never sent. */
const ID = /^[A-Za-z0-9_-]{1,64}$/;

export interface ProposalRef {
  id: string;
  side: Side;
}

/** `/<id>/<side>/<file path>`: the file's own name last, so the editor picks its language. */
export function proposalPath(id: string, side: 'base' | 'proposed', file: string): string {
  return `/${id}/${side}/${file.replace(/^\/+/, '')}`;
}

/** The proposal and side a `talos-proposal:` path names (the server's own `/<id>.diff` too). */
export function parseProposalPath(uriPath: string): ProposalRef | undefined {
  const diff = /^\/([^/]+)\.diff$/.exec(uriPath);
  if (diff) return ID.test(diff[1]) ? { id: diff[1], side: 'diff' } : undefined;
  const parts = /^\/([^/]+)\/(base|proposed)(\/.*)?$/.exec(uriPath);
  if (!parts || !ID.test(parts[1])) return undefined;
  return { id: parts[1], side: parts[2] as Side };
}

export function taskPath(taskId: string): string {
  return `/${taskId}.md`;
}

export function parseTaskPath(uriPath: string): string | undefined {
  const match = /^\/([^/]+)\.md$/.exec(uriPath);
  return match && ID.test(match[1]) ? match[1] : undefined;
}

/** Sends one request to the server (the language client's `sendRequest`). */
export type Request = (method: string, params: object) => Promise<unknown>;
/** Runs one server command (`workspace/executeCommand` with one object argument). */
export type Execute = (command: string, argument: object) => Promise<unknown>;

export class Documents {
  constructor(private readonly request: Request, private readonly execute: Execute) {}

  /** A proposal side's text; throws an Error saying what failed (VS Code shows it). */
  async proposal(uriPath: string): Promise<string> {
    const ref = parseProposalPath(uriPath);
    if (!ref) throw new Error(`Talos: ${uriPath} does not name a proposal`);
    let text: unknown;
    try {
      text = await this.request('talos/proposalContent', { proposal_id: ref.id, side: ref.side });
    } catch (error) {
      throw new Error(`Talos: cannot show proposal ${ref.id}: ${(error as Error).message}`);
    }
    if (typeof text !== 'string') throw new Error(`Talos: the server sent no text for proposal ${ref.id}`);
    return text;
  }

  /** A task's transcript (Markdown, every model-written part fenced by the server). */
  async transcript(uriPath: string): Promise<string> {
    const id = parseTaskPath(uriPath);
    if (!id) throw new Error(`Talos: ${uriPath} does not name a task`);
    let text: unknown;
    try {
      text = await this.execute('talos.task.show', { task_id: id });
    } catch (error) {
      throw new Error(`Talos: cannot show task ${id}: ${(error as Error).message}`);
    }
    if (typeof text !== 'string') throw new Error(`Talos: the server sent no transcript for task ${id}`);
    return text;
  }
}

/** Of the open documents' paths, those showing one of `ids` (to refresh when they change). */
export function showing(paths: string[], ids: Set<string>): string[] {
  return paths.filter((p) => {
    const ref = parseProposalPath(p);
    return ref !== undefined && ids.has(ref.id);
  });
}
