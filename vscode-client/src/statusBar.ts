// The status bar item: model, last completion latency, on/off toggle (click), server state.
import * as vscode from 'vscode';

export type ServerState = 'starting' | 'running' | 'stopped' | 'failed';

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private state: ServerState = 'stopped';
  private enabled = true;
  private model = 'default';
  private device = '';
  private lastLatencyMs: number | undefined;
  private detail = '';

  constructor() {
    this.item = vscode.window.createStatusBarItem('parafill.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'parafill';
    this.render();
    this.item.show();
  }

  setState(state: ServerState, detail = ''): void {
    this.state = state;
    this.detail = detail;
    this.render();
  }

  setEnabled(enabled: boolean): void {
    this.enabled = enabled;
    this.render();
  }

  setModel(model: string, device = ''): void {
    this.model = model;
    this.device = device;
    this.render();
  }

  setLatency(ms: number): void {
    this.lastLatencyMs = ms;
    this.render();
  }

  private render(): void {
    const latency = this.lastLatencyMs === undefined ? '' : ` ${Math.round(this.lastLatencyMs)} ms`;
    const tip = new vscode.MarkdownString(undefined, true);
    tip.appendMarkdown('**parafill** inline completions\n\n');
    tip.appendMarkdown(`- Model: \`${this.model}\`${this.device ? ` on ${this.device}` : ''}\n`);
    tip.appendMarkdown(`- Last completion: ${latency ? latency.trim() : 'none yet'}\n`);
    tip.appendMarkdown(`- Server: ${this.state}${this.detail ? ` (${this.detail})` : ''}\n\n`);
    this.item.backgroundColor = undefined;
    if (this.state === 'failed') {
      this.item.text = '$(error) parafill';
      this.item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
      this.item.command = 'parafill.showLog';
      tip.appendMarkdown('Click to show the server log.');
    } else if (this.state === 'starting') {
      this.item.text = `$(loading~spin) parafill ${this.model}`;
      this.item.command = 'parafill.showLog';
      tip.appendMarkdown('Starting the server; click to show its log.');
    } else if (!this.enabled) {
      this.item.text = '$(circle-slash) parafill off';
      this.item.command = 'parafill.toggle';
      tip.appendMarkdown('Click to turn inline completions on.');
    } else {
      this.item.text = `$(sparkle) parafill ${this.model}${latency ? ` ·${latency}` : ''}`;
      this.item.command = 'parafill.toggle';
      tip.appendMarkdown('Click to turn inline completions off.');
    }
    this.item.tooltip = tip;
    this.item.accessibilityInformation = { label: `parafill ${this.enabled ? 'on' : 'off'}, ${this.state}` };
  }

  dispose(): void {
    this.item.dispose();
  }
}
