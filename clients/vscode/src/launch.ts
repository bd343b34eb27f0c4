/**
 * Finding and starting `talos-ls`: pure functions over the file system and the environment,
 * unit-tested. The configured command wins; otherwise the workspace's own virtual environment
 * (where `pip install -e .` put it), then PATH. Every place tried is reported, so the
 * notification that it was not found says exactly where it looked.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { inline } from './text';

export const INSTALL_HINT = 'pip install talos-ls';

export interface Found {
  command: string;
  tried: string[];
}

export interface NotFound {
  command: undefined;
  tried: string[];
}

function executable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function names(platform: NodeJS.Platform): string[] {
  return platform === 'win32' ? ['talos-ls.exe', 'talos-ls.cmd', 'talos-ls'] : ['talos-ls'];
}

/**
 * The server's command: `configured` (a path, or a name looked up on PATH) if set, else
 * `talos-ls` in each folder's `.venv` or `venv`, else on PATH.
 */
export function findServer(configured: string, folders: string[], envPath: string, platform: NodeJS.Platform = process.platform): Found | NotFound {
  const tried: string[] = [];
  const bin = platform === 'win32' ? 'Scripts' : 'bin';
  const onPath = (name: string): string | undefined => {
    for (const dir of envPath.split(path.delimiter).filter(Boolean)) {
      const candidate = path.join(dir, name);
      if (executable(candidate)) return candidate;
    }
    tried.push(`${name} on PATH`);
    return undefined;
  };
  if (configured.trim()) {
    const command = configured.trim();
    if (command.includes('/') || command.includes('\\')) {
      if (executable(command)) return { command, tried };
      tried.push(command);
      return { command: undefined, tried };
    }
    const found = onPath(command);
    return found ? { command: found, tried } : { command: undefined, tried };
  }
  for (const folder of folders) {
    for (const venv of ['.venv', 'venv']) {
      for (const name of names(platform)) {
        const candidate = path.join(folder, venv, bin, name);
        if (executable(candidate)) return { command: candidate, tried };
      }
      tried.push(path.join(folder, venv, bin, names(platform)[0]));
    }
  }
  for (const name of names(platform)) {
    const found = onPath(name);
    if (found) return { command: found, tried };
  }
  return { command: undefined, tried };
}

/**
 * The PATH that was searched, for a message: each entry shown inert, at most `max` characters,
 * then how many entries are left out. It is the extension host's PATH: VS Code's, which it
 * took from your login shell, not the one a terminal's rc files build.
 */
export function searchedPath(envPath: string, max = 600): string {
  const dirs = envPath.split(path.delimiter).filter(Boolean).map((d) => inline(d, 200));
  if (!dirs.length) return '(empty)';
  const shown: string[] = [];
  let length = 0;
  for (const dir of dirs) {
    if (shown.length && length + dir.length + 1 > max) break;
    shown.push(dir);
    length += dir.length + 1;
  }
  const left = dirs.length - shown.length;
  return shown.join(path.delimiter) + (left ? ` … and ${left} more` : '');
}

/** Where the person sets the server command: Remote settings in a remote window. */
function whereToSet(remote: boolean): string {
  return remote ? 'set talos.server.command to its path in your Remote settings (a remote window does not apply it from User settings)' : 'set talos.server.command to its path';
}

/** What the notification says when the server cannot be found. */
export function notFoundMessage(tried: string[], envPath: string, remote = false): string {
  return (
    `Talos: talos-ls was not found (tried ${tried.map((t) => inline(t, 300)).join(', ')}). ` +
    `PATH searched (VS Code's, from your login shell, which may differ from your terminal's): ${searchedPath(envPath)}. ` +
    `Install it with "${INSTALL_HINT}" (in the workspace's .venv or on that PATH), or ${whereToSet(remote)}.`
  );
}

/**
 * The last lines a server wrote on stderr, for the message when it dies: one process at a time
 * (`reset` when a new one starts), each line at most `width` characters, at most `keep` lines.
 * A known secret is replaced before anything is kept.
 */
export class StderrTail {
  private lines: string[] = [];

  constructor(private readonly keep = 20, private readonly width = 500, private secrets: string[] = []) {}

  reset(secrets: string[] = this.secrets): void {
    this.lines = [];
    this.secrets = secrets.filter((s) => s.length >= 4);
  }

  push(line: string): void {
    let kept = line;
    for (const secret of this.secrets) kept = kept.split(secret).join('<the API key>');
    kept = kept.replace(/\s+$/, '');
    if (!kept) return;
    this.lines.push(kept.length > this.width ? `${kept.slice(0, this.width - 1)}…` : kept);
    if (this.lines.length > this.keep) this.lines.shift();
  }

  /** The last `count` lines, oldest first. */
  last(count = 3): string[] {
    return this.lines.slice(-count);
  }
}

/**
 * The server's last stderr lines as one inert line for a notification: links broken, hidden
 * characters shown, joined by ⏎, at most `max` characters (the end kept: the cause is
 * usually last).
 */
export function stderrExcerpt(lines: string[], max = 500): string {
  let text = lines.map((l) => l.replace(/\r\n|\r|\n|\t/g, ' ')).join(' ⏎ ');
  if (text.length > max) text = `…${text.slice(text.length - max + 1)}`;
  return inline(text, max + 1);
}

/** What the notification says when the server exits before it has answered. */
export function startFailureMessage(command: string, stderr: string[], error: string, remote = false): string {
  const cause = stderr.length ? `Its last output: "${stderrExcerpt(stderr)}".` : `It wrote nothing on stderr (${inline(error, 200)}).`;
  return (
    `Talos: talos-ls (${inline(command, 300)}) stopped as it started. ${cause} ` +
    `Run it in a terminal to see the whole error; reinstall it with "${INSTALL_HINT}", or ${whereToSet(remote)}.`
  );
}

/** What the notification says when a running server kept crashing and was given up. */
export function crashLoopMessage(stderr: string[], limit = 5, minutes = 3): string {
  const cause = stderr.length ? ` Its last output: "${stderrExcerpt(stderr)}".` : '';
  return `Talos: the language server crashed ${limit} times in ${minutes} minutes and was not restarted.${cause} Run Talos: Restart to start it again; Show Log has the rest.`;
}

/**
 * The server process's environment: the editor's, plus the key from SecretStorage under the
 * variable `apiKeyEnv` names (a key set in the environment already is kept unless one is
 * stored). Nothing else is added; the key is never logged.
 */
export function serverEnv(base: NodeJS.ProcessEnv, apiKeyEnv: string | null | undefined, secret: string | undefined): NodeJS.ProcessEnv {
  const env = { ...base };
  if (secret) env[apiKeyEnv || 'OPENAI_API_KEY'] = secret;
  return env;
}

/**
 * Restarts after crashes, with exponential back-off: 1 s, 2 s, 4 s … up to 30 s; after
 * `limit` crashes within `window` ms it gives up (a server that cannot stay up needs the
 * person, not a restart loop). A run that lasted longer than the window forgets old crashes.
 */
export class Backoff {
  private crashes: number[] = [];

  constructor(private readonly limit = 5, private readonly window = 3 * 60_000, private readonly first = 1000, private readonly max = 30_000) {}

  /** The delay before the next restart, or undefined to give up. */
  crashed(now: number): number | undefined {
    this.crashes = this.crashes.filter((t) => now - t < this.window);
    this.crashes.push(now);
    if (this.crashes.length > this.limit) return undefined;
    return Math.min(this.max, this.first * 2 ** (this.crashes.length - 1));
  }

  /** A restart asked for by the person starts afresh. */
  reset(): void {
    this.crashes = [];
  }
}
