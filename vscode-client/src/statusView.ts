// What the status bar item shows for a given server, model and on/off state. No VS Code import: unit-tested
// in node (tests/vscode/client.test.mjs); statusBar.ts puts the result on the real item.
import * as path from 'node:path';

export type ServerState = 'starting' | 'running' | 'stopped' | 'failed';
/** The model's state as the server reports it in `parafill/stats`. */
export type ModelState = 'idle' | 'loading' | 'ready' | 'failed';
/**
 * What the client knows of the model: a reported state, `checking` while a running server has not answered
 * `parafill/stats` yet, or undefined when no server runs or the server does not report its model.
 */
export type ModelView = ModelState | 'checking' | undefined;

export interface StatusInput {
  state: ServerState;
  detail: string;
  enabled: boolean;
  model: string;
  device: string;
  modelState: ModelView;
  modelError: string | undefined;
  lastLatencyMs: number | undefined;
}

export interface StatusView {
  text: string;
  command: 'parafill.toggle' | 'parafill.showLog';
  background: 'error' | 'warning' | undefined;
  /** Markdown, theme icons allowed. */
  tooltip: string;
  ariaLabel: string;
}

/** The label of a model folder: its last path component (the server reports the folder it really loaded). */
export function modelLabelOf(folder: string): string {
  return path.basename(folder.replace(/[/\\]+$/, '')) || folder;
}

/**
 * The order decides what one icon says:
 * - a server that cannot run comes first: nothing works until it is fixed;
 * - then "off": a click on the item must show its effect at once, even while the model is still loading
 *   (the server keeps loading it, and the tooltip still says so);
 * - then work in progress (server starting, model not reported yet, model loading);
 * - then a model that failed to load;
 * - only then "on", which promises completions.
 */
export function statusView(s: StatusInput): StatusView {
  const latency = s.lastLatencyMs === undefined ? '' : `${Math.round(s.lastLatencyMs)} ms`;
  const tip: string[] = ['**parafill** inline completions\n\n'];
  tip.push(`- Model: \`${s.model}\`${s.device ? ` on ${s.device}` : ''}${s.modelState ? ` (${s.modelState})` : ''}\n`);
  if (s.modelError) {
    tip.push(`- Error: ${s.modelError}\n`);
  }
  tip.push(`- Last completion: ${latency || 'none yet'}\n`);
  tip.push(`- Server: ${s.state}${s.detail ? ` (${s.detail})` : ''}\n\n`);

  let text: string;
  let command: StatusView['command'] = 'parafill.showLog';
  let background: StatusView['background'];
  const busy = s.state === 'starting' || s.modelState === 'loading' || s.modelState === 'checking';
  if (s.state === 'failed') {
    text = '$(error) parafill';
    background = 'error';
    tip.push('Click to show the server log.');
  } else if (!s.enabled) {
    text = '$(circle-slash) parafill off';
    command = 'parafill.toggle';
    tip.push('Click to turn inline completions on.');
  } else if (busy) {
    text = `$(loading~spin) parafill ${s.model}`;
    tip.push(
      s.state === 'starting' ? 'Starting the server…' : s.modelState === 'checking' ? 'Checking the model…' : 'Loading the model…',
    );
  } else if (s.modelState === 'failed') {
    text = `$(warning) parafill ${s.model}`;
    background = 'warning';
    tip.push('The model did not load: fix "parafill.model" or "parafill.device". Click to show the log.');
  } else {
    text = `$(sparkle) parafill ${s.model}${latency ? ` · ${latency}` : ''}`;
    command = 'parafill.toggle';
    tip.push('Click to turn inline completions off.');
  }
  const ariaLabel = `parafill ${s.enabled ? 'on' : 'off'}, server ${s.state}${s.modelState ? `, model ${s.modelState}` : ''}`;
  return { text, command, background, tooltip: tip.join(''), ariaLabel };
}
