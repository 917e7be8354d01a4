// VS Code settings (`parafill.*`) -> what the server takes (initializationOptions / didChangeConfiguration).
import * as vscode from 'vscode';
import { expandCommandPath, expandPath } from './paths';
import type { ServerCommandSettings } from './serverCommand';

export const SECTION = 'parafill';

/** Server setting name (lsp_server/settings.py, camelCase) for each forwarded `parafill.<key>`. */
export const SERVER_KEYS: Record<string, string> = {
  enable: 'enable',
  model: 'model',
  'explain.model': 'explainModel',
  device: 'device',
  dtype: 'dtype',
  backend: 'backend',
  cacheBudgetMb: 'cacheMb',
  maxTokensSingleLine: 'maxTokensLine',
  maxTokensMultiLine: 'maxTokensBlock',
  maxLines: 'maxLines',
  inlineMode: 'inlineMode',
  blockSize: 'blockSize',
  threshold: 'threshold',
  minConfidence: 'minConfidence',
  timeBudgetMs: 'timeBudgetMs',
  debounceMs: 'debounceMs',
  contextTokens: 'contextTokens',
  'explain.maxTokens': 'explainMaxTokens',
  'explain.timeBudgetMs': 'explainTimeBudgetMs',
  'explain.stopOnLoop': 'explainStopOnLoop',
  lookupTokens: 'lookupTokens',
  maxDocumentKb: 'maxDocumentKb',
  'remote.url': 'remoteUrl',
  'remote.model': 'remoteModel',
  'remote.apiKeyEnv': 'remoteApiKeyEnv',
  'remote.routes': 'remoteRoutes',
  'remote.explainApi': 'remoteExplainApi',
  'remote.explainTemplate': 'remoteExplainTemplate',
  'remote.fimTemplate': 'remoteFimTemplate',
  'remote.timeoutMs': 'remoteTimeoutMs',
};

/** Settings where empty or null means "the server's default" (the shipped model, the family's block settings...). */
const NULLABLE = new Set([
  'model',
  'explain.model',
  'dtype',
  'inlineMode',
  'blockSize',
  'threshold',
  'remote.url',
  'remote.model',
  'remote.apiKeyEnv',
  'remote.fimTemplate',
]);

/** Folder settings: sent as absolute paths (`~`, `${workspaceFolder}` and relative paths resolved here). */
const PATHS = new Set(['model', 'explain.model']);

/** Settings whose change needs a new server process rather than a didChangeConfiguration. */
export const RESTART_KEYS = ['languages', 'server.path', 'server.pythonPath', 'server.args'];

function config(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration(SECTION);
}

export function isEnabled(): boolean {
  return config().get<boolean>('enable', true);
}

export function languages(): string[] {
  const langs = config().get<string[]>('languages', ['python']);
  return langs.length > 0 ? langs : ['python'];
}

/** The documents the server gets (synced, completed, explained): files and untitled editors of `languages`. */
export function documentSelector(): { scheme: string; language: string }[] {
  return languages().flatMap((language) => [
    { scheme: 'file', language },
    { scheme: 'untitled', language },
  ]);
}

/** What relative paths in settings are relative to: the first workspace folder (also the server's cwd). */
export function workspaceFolder(): string | undefined {
  const folder = vscode.workspace.workspaceFolders?.[0];
  return folder?.uri.scheme === 'file' ? folder.uri.fsPath : undefined;
}

export function serverCommandSettings(): ServerCommandSettings {
  const c = config();
  const folder = workspaceFolder();
  return {
    pythonPath: expandCommandPath(c.get<string>('server.pythonPath', ''), folder),
    path: expandCommandPath(c.get<string>('server.path', ''), folder),
    args: c.get<string[]>('server.args', []),
  };
}

/** The object sent as initializationOptions and as didChangeConfiguration settings. */
export function serverSettings(): Record<string, unknown> {
  const c = config();
  const folder = workspaceFolder();
  const out: Record<string, unknown> = {};
  for (const [key, serverKey] of Object.entries(SERVER_KEYS)) {
    let value = c.get<unknown>(key);
    if (PATHS.has(key) && typeof value === 'string') {
      value = expandPath(value, folder);
    }
    const empty = value === undefined || value === null || value === '';
    if (!empty) {
      out[serverKey] = value;
    } else if (NULLABLE.has(key)) {
      out[serverKey] = null; // back to the server's default, also after a value was set and removed
    }
  }
  return out;
}

/** Short model name for the status bar: the model folder's basename, or "default". */
export function modelLabel(): string {
  const folder = expandPath(config().get<string>('model', ''), workspaceFolder()).replace(/[/\\]+$/, '');
  if (!folder) {
    return 'default';
  }
  const parts = folder.split(/[/\\]/);
  return parts[parts.length - 1] || folder;
}

export function needsRestart(event: vscode.ConfigurationChangeEvent): boolean {
  return RESTART_KEYS.some((k) => event.affectsConfiguration(`${SECTION}.${k}`));
}

/** Turn inline completions on or off where the user set it (workspace if set there, else user settings). */
export async function setEnabled(enabled: boolean): Promise<void> {
  const c = config();
  const inspect = c.inspect<boolean>('enable');
  const target =
    inspect?.workspaceFolderValue !== undefined
      ? vscode.ConfigurationTarget.WorkspaceFolder
      : inspect?.workspaceValue !== undefined
        ? vscode.ConfigurationTarget.Workspace
        : vscode.ConfigurationTarget.Global;
  await c.update('enable', enabled, target);
}
