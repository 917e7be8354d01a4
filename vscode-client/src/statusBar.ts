// The status bar item: model, last completion latency, on/off toggle (click), server and model state.
// What it shows is decided in statusView.ts; this class holds the state and puts the view on the item.
import * as vscode from 'vscode';
import { type ModelState, type ModelView, type ServerState, modelLabelOf, statusView } from './statusView';

export type { ModelState, ServerState } from './statusView';

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  private state: ServerState = 'stopped';
  private detail = '';
  private enabled = true;
  private model = 'default';
  private device = '';
  private modelState: ModelView;
  private modelError: string | undefined;
  private lastLatencyMs: number | undefined;

  constructor() {
    this.item = vscode.window.createStatusBarItem('parafill.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'parafill';
    this.render();
    this.item.show();
  }

  /** A running server's model is `checking` until the server reports it (or turns out not to). */
  setState(state: ServerState, detail = ''): void {
    this.state = state;
    this.detail = detail;
    this.modelState = state === 'running' ? 'checking' : undefined;
    this.modelError = undefined;
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
      this.model = modelLabelOf(folder);
    }
    if (device) {
      this.device = device;
    }
    this.render();
  }

  /** The server does not answer `parafill/stats` (another server, a remote one): its model state stays unknown. */
  setModelUnreported(): void {
    if (this.modelState === 'checking') {
      this.modelState = undefined;
      this.render();
    }
  }

  setLatency(ms: number): void {
    this.lastLatencyMs = ms;
    this.render();
  }

  private render(): void {
    const view = statusView({
      state: this.state,
      detail: this.detail,
      enabled: this.enabled,
      model: this.model,
      device: this.device,
      modelState: this.modelState,
      modelError: this.modelError,
      lastLatencyMs: this.lastLatencyMs,
    });
    this.item.text = view.text;
    this.item.command = view.command;
    this.item.backgroundColor =
      view.background === undefined ? undefined : new vscode.ThemeColor(`statusBarItem.${view.background}Background`);
    this.item.tooltip = new vscode.MarkdownString(view.tooltip, true);
    this.item.accessibilityInformation = { label: view.ariaLabel };
  }

  dispose(): void {
    this.item.dispose();
  }
}
