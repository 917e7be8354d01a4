// Path settings as users write them: `~`, `${workspaceFolder}` and relative paths. No `vscode` import, so the
// node tests can load it as is.
import * as os from 'node:os';
import * as path from 'node:path';

/** A path rather than a bare command name to look up on PATH: absolute, or with a separator (either kind). */
export function isPathLike(value: string): boolean {
  return path.isAbsolute(value) || /[\\/]/.test(value);
}

/**
 * `value` with `${workspaceFolder}` and a leading `~` expanded, made absolute against `workspaceFolder`.
 * The server's working directory would be the same folder, but the extension checks executables itself, and an
 * explicit absolute path leaves no doubt in the log. Without a workspace folder a relative path stays relative.
 */
export function expandPath(value: string, workspaceFolder: string | undefined, home = os.homedir()): string {
  let p = value.trim();
  if (!p) {
    return p;
  }
  if (workspaceFolder !== undefined) {
    p = p.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  }
  if (p === '~' || p.startsWith('~/') || p.startsWith('~\\')) {
    p = path.join(home, p.slice(1));
  }
  if (!path.isAbsolute(p) && workspaceFolder !== undefined) {
    p = path.resolve(workspaceFolder, p);
  }
  return p;
}

/** A command setting (`server.path`, `server.pythonPath`): bare names are left for the PATH lookup. */
export function expandCommandPath(value: string, workspaceFolder: string | undefined, home = os.homedir()): string {
  const p = value.trim();
  return p.includes('${workspaceFolder}') || isPathLike(p) ? expandPath(p, workspaceFolder, home) : p;
}
