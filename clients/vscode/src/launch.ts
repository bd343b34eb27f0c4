/**
 * Finding and starting `talos-ls`: pure functions over the file system and the environment,
 * unit-tested. The configured command wins; otherwise the workspace's own virtual environment
 * (where `pip install -e .` put it), then PATH. Every place tried is reported, so the
 * notification that it was not found says exactly where it looked.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

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

/** What the notification says when the server cannot be found or started. */
export function notFoundMessage(tried: string[]): string {
  return `Talos: talos-ls was not found (tried ${tried.join(', ')}). Install it with "${INSTALL_HINT}" (in the workspace's .venv or on PATH), or set talos.server.command to its path.`;
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
