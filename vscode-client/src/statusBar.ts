// The status bar item: model, last completion latency, on/off toggle (click), server and model state.
import * as path from 'node:path';
import * as vscode from 'vscode';

export type ServerState = 'starting' | 'running' | 'stopped' | 'failed';
/** The model's state as the server reports it in `parafill/stats`. */
export type ModelState = 'idle' | 'loading' | 'ready' | 'failed';

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private state: ServerState = 'stopped';
  private detail = '';
  private enabled = true;
  private model = 'default';
  private device = '';
  private modelState: ModelState | undefined;
  private modelError: string | undefined;
  private lastLatencyMs: number | undefined;

  constructor() {
    this.item = vscode.window.createStatusBarItem('parafill.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'parafill';
    this.render();
    this.item.show();
  }

  setState(state: ServerState, detail = ''): void {
    this.state = state;
    this.detail = detail;
    if (state !== 'running') {
      this.modelState = undefined;
    }
    this.render();
  }

  setEnabled(enabled: boolean): void {
    this.enabled = enabled;
    this.render();
  }

  /** From the settings, before the server says more. */
  setModel(model: string, device = ''): void {
    this.model = model;
    this.device = device;
    this.render();
  }

  /** From the server: the model's state, and the folder and device it really uses. */
  setModelState(state: ModelState, error?: string, folder?: string, device?: string): void {
    this.modelState = state;
    this.modelError = error;
    if (folder) {
      this.model = path.basename(folder.replace(/[/\\]+$/, '')) || folder;
    }
    if (device) {
      this.device = device;
    }
    this.render();
  }

  setLatency(ms: number): void {
    this.lastLatencyMs = ms;
    this.render();
  }

  private render(): void {
    const latency = this.lastLatencyMs === undefined ? '' : `${Math.round(this.lastLatencyMs)} ms`;
    const tip = new vscode.MarkdownString(undefined, true);
    tip.appendMarkdown('**parafill** inline completions\n\n');
    tip.appendMarkdown(`- Model: \`${this.model}\`${this.device ? ` on ${this.device}` : ''}`);
    tip.appendMarkdown(`${this.modelState ? ` (${this.modelState})` : ''}\n`);
    if (this.modelError) {
      tip.appendMarkdown(`- Error: ${this.modelError}\n`);
    }
    tip.appendMarkdown(`- Last completion: ${latency || 'none yet'}\n`);
    tip.appendMarkdown(`- Server: ${this.state}${this.detail ? ` (${this.detail})` : ''}\n\n`);
    this.item.backgroundColor = undefined;
    let text: string;
    if (this.state === 'failed') {
      text = '$(error) parafill';
      this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
      this.item.command = 'parafill.showLog';
      tip.appendMarkdown('Click to show the server log.');
    } else if (this.state === 'starting' || this.modelState === 'loading') {
      text = `$(loading~spin) parafill ${this.model}`;
      this.item.command = 'parafill.showLog';
      tip.appendMarkdown(this.state === 'starting' ? 'Starting the server…' : 'Loading the model…');
    } else if (this.modelState === 'failed') {
      text = `$(warning) parafill ${this.model}`;
      this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.warningBackground');
      this.item.command = 'parafill.showLog';
      tip.appendMarkdown('The model did not load: fix "parafill.model" or "parafill.device". Click to show the log.');
    } else if (!this.enabled) {
      text = '$(circle-slash) parafill off';
      this.item.command = 'parafill.toggle';
      tip.appendMarkdown('Click to turn inline completions on.');
    } else {
      text = `$(sparkle) parafill ${this.model}${latency ? ` · ${latency}` : ''}`;
      this.item.command = 'parafill.toggle';
      tip.appendMarkdown('Click to turn inline completions off.');
    }
    this.item.text = text;
    this.item.tooltip = tip;
    this.item.accessibilityInformation = {
      label: `parafill ${this.enabled ? 'on' : 'off'}, server ${this.state}${this.modelState ? `, model ${this.modelState}` : ''}`,
    };
  }

  dispose(): void {
    this.item.dispose();
  }
}
