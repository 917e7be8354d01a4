// Which command starts `parafill serve`, and what to tell the user when it cannot be started.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isPathLike } from './paths';

export interface ServerCommandSettings {
  /** `parafill.server.pythonPath`: an interpreter with parafill installed (wins over `path`). */
  pythonPath: string;
  /** `parafill.server.path`: the `parafill` executable. */
  path: string;
  /** `parafill.server.args`: extra arguments after `serve`. */
  args: string[];
}

export interface ServerCommand {
  command: string;
  args: string[];
  /** How the command was chosen, for the log. */
  source: string;
}

/** A start-up problem with the fix to offer; `message` is shown to the user as is. */
export class ServerNotFoundError extends Error {}

function isExecutableFile(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** Like `which`: the first executable `name` on PATH (PATHEXT on Windows), or undefined. */
export function findOnPath(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const dirs = (env.PATH ?? '').split(path.delimiter).filter(Boolean);
  const exts = process.platform === 'win32' ? (env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of dirs) {
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      if (isExecutableFile(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

function venvExecutable(folder: string, name: string): string {
  return process.platform === 'win32'
    ? path.join(folder, '.venv', 'Scripts', `${name}.exe`)
    : path.join(folder, '.venv', 'bin', name);
}

const INSTALL_HINT =
  'Install it from a clone of the parafill repository with `bash scripts/setup.sh` (or `pip install -e <clone>`), ' +
  'or set "parafill.server.path" to the `parafill` executable, ' +
  'or "parafill.server.pythonPath" to a Python interpreter that has parafill installed.';

/**
 * The command line for `parafill serve` over stdio. Order: pythonPath setting, path setting,
 * `parafill` on PATH, `.venv/bin/parafill` in a workspace folder. Throws ServerNotFoundError with the fix.
 */
export function resolveServerCommand(settings: ServerCommandSettings, workspaceFolders: string[]): ServerCommand {
  const serveArgs = ['serve', ...settings.args];
  if (settings.pythonPath) {
    const python = isPathLike(settings.pythonPath) ? settings.pythonPath : findOnPath(settings.pythonPath);
    if (!python || !isExecutableFile(python)) {
      throw new ServerNotFoundError(
        `parafill: the Python interpreter "${settings.pythonPath}" ("parafill.server.pythonPath") does not exist ` +
          'or is not executable. Point the setting at the interpreter of the environment where parafill is installed ' +
          '(for example /path/to/parafill/.venv/bin/python), or clear it to use the `parafill` command.',
      );
    }
    return { command: python, args: ['-m', 'lsp_server.cli', ...serveArgs], source: 'parafill.server.pythonPath' };
  }
  if (settings.path) {
    const exe = isPathLike(settings.path) ? settings.path : findOnPath(settings.path);
    if (!exe || !isExecutableFile(exe)) {
      throw new ServerNotFoundError(
        `parafill: the server executable "${settings.path}" ("parafill.server.path") was not found or is not ` +
          `executable. ${INSTALL_HINT}`,
      );
    }
    return { command: exe, args: serveArgs, source: 'parafill.server.path' };
  }
  const onPath = findOnPath('parafill');
  if (onPath) {
    return { command: onPath, args: serveArgs, source: 'PATH' };
  }
  for (const folder of workspaceFolders) {
    const candidate = venvExecutable(folder, 'parafill');
    if (isExecutableFile(candidate)) {
      return { command: candidate, args: serveArgs, source: 'workspace .venv' };
    }
  }
  throw new ServerNotFoundError(`parafill: the language server (\`parafill\`) was not found on PATH. ${INSTALL_HINT}`);
}

/** A stderr line of a log record (lsp_server/logs.py FORMAT): its level and the rest. */
const LOG_RECORD = /^parafill (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/;

export function parseLogRecord(line: string): { level: string; text: string } | undefined {
  const m = LOG_RECORD.exec(line);
  return m ? { level: m[1], text: m[2] } : undefined;
}

/**
 * The stderr lines that can say why the server died: error records, and lines that are not log records
 * (a traceback, argparse's message). INFO lines are left out: those of `parafill.model` mention "model" and
 * would be taken for the cause.
 */
export function problemLines(stderrTail: string[]): string[] {
  return stderrTail.filter((line) => {
    if (!line.trim()) {
      return false;
    }
    const record = parseLogRecord(line);
    return !record || record.level === 'ERROR' || record.level === 'CRITICAL';
  });
}

/**
 * A one-paragraph explanation of why the server did not start (`crashed`: kept dying after it had run), from
 * its last stderr lines, with the fix where the cause is known.
 */
export function explainStartFailure(command: ServerCommand, stderrTail: string[], error?: unknown, crashed = false): string {
  const stderr = stderrTail.join('\n');
  const last = problemLines(stderrTail).slice(-1)[0] ?? '';
  const cmdline = [command.command, ...command.args].join(' ');
  let fix = 'Open "parafill: Show Server Log" for the full output.';
  if (/No module named '?(lsp_server|parafill)/.test(stderr)) {
    fix = `parafill is not installed in ${command.command}. Install it there (\`${command.command} -m pip install -e <parafill clone>\`) or change "parafill.server.pythonPath".`;
  } else if (/invalid choice: 'serve'|unrecognized arguments/.test(stderr)) {
    fix = 'This parafill is too old or the extra arguments are wrong: update its clone (`git pull`, then `bash scripts/setup.sh`) or check "parafill.server.args".';
  } else if (/model|safetensors|config\.json|tokenizer/i.test(last)) {
    fix = 'Check "parafill.model": it must be a folder with config.json, *.safetensors and tokenizer.json (empty uses the shipped default).';
  } else if (/CUDA|cuda/.test(last)) {
    fix = 'Set "parafill.device" to "cpu", or install a CUDA build of PyTorch.';
  }
  const reason = last || (error instanceof Error ? error.message : error ? String(error) : 'it exited');
  const what = crashed ? 'crashed repeatedly' : 'failed to start';
  return `parafill: the language server ${what} (${cmdline}): ${reason}. ${fix}`;
}
