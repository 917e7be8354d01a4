// The status bar item: model, last completion latency, on/off toggle (click), server and model state.
// What it shows is decided in statusView.ts; this class holds the state and puts the view on the item.
import * as vscode from 'vscode';
import { type ModelState, type ServerState, type StatusInput, modelLabelOf, statusView } from './statusView';

export type { ModelState, ServerState } from './statusView';

export class StatusBar implements vscode.Disposable {
  private readonly item: vscode.StatusBarItem;
  /** Everything the item shows, as statusView() takes it. */
  private readonly shown: StatusInput = {
    state: 'stopped',
    detail: '',
    enabled: true,
    model: 'default',
    device: '',
    modelState: undefined,
    modelError: undefined,
    lastLatencyMs: undefined,
  };

  constructor() {
    this.item = vscode.window.createStatusBarItem('parafill.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'parafill';
    this.render();
    this.item.show();
  }

  /** A running server's model is `checking` until the server reports it (or turns out not to). */
  setState(state: ServerState, detail = ''): void {
    const modelState = state === 'running' ? 'checking' : undefined;
    Object.assign(this.shown, { state, detail, modelState, modelError: undefined });
    this.render();
  }

  setEnabled(enabled: boolean): void {
    this.shown.enabled = enabled;
    this.render();
  }

  /** From the settings, before the server says more. */
  setModel(model: string, device = ''): void {
    Object.assign(this.shown, { model, device });
    this.render();
  }

  /** From the server: the model's state, and the folder and device it really uses. */
  setModelState(state: ModelState, error?: string, folder?: string, device?: string): void {
    this.shown.modelState = state;
    this.shown.modelError = error;
    if (folder) {
      this.shown.model = modelLabelOf(folder);
    }
    if (device) {
      this.shown.device = device;
    }
    this.render();
  }

  /** The server does not answer `parafill/stats` (another server, a remote one): its model state stays unknown. */
  setModelUnreported(): void {
    if (this.shown.modelState === 'checking') {
      this.shown.modelState = undefined;
      this.render();
    }
  }

  setLatency(ms: number): void {
    this.shown.lastLatencyMs = ms;
    this.render();
  }

  private render(): void {
    const view = statusView(this.shown);
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
