// The language client: starts `parafill serve` over stdio, restarts it after a crash, forwards settings,
// and times inline completions for the status bar.
import * as vscode from 'vscode';
import {
  CloseAction,
  type CloseHandlerResult,
  DidChangeConfigurationNotification,
  ErrorAction,
  type ErrorHandlerResult,
  type Executable,
  LanguageClient,
  type LanguageClientOptions,
  type Message,
  State,
} from 'vscode-languageclient/node';
import * as settings from './settings';
import { explainStartFailure, resolveServerCommand, type ServerCommand, ServerNotFoundError } from './serverCommand';
import type { ModelState, StatusBar } from './statusBar';

/** The `model` part of the server's `parafill/stats` answer (lsp_server/engine_holder.py). */
interface ModelStatus {
  state: ModelState;
  error?: string | null;
  folder?: string;
  device?: string;
}

const MAX_RESTARTS = 4;
const STATS_REQUEST = 'parafill/stats';
const RESTART_WINDOW_MS = 3 * 60 * 1000;
const STDERR_TAIL_LINES = 40;
const IDLE_POLLS = 8; // about 10 s of polls (250 ms doubling to 2 s) while the model state is `idle`

export class ParafillClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private command: ServerCommand | undefined;
  private stderrTail: string[] = [];
  private crashTimes: number[] = [];
  private starting: Promise<void> | undefined;
  private modelTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly status: StatusBar,
  ) {}

  /** The running client, if any (for requests such as explain). */
  get languageClient(): LanguageClient | undefined {
    return this.client?.state === State.Running ? this.client : undefined;
  }

  async start(): Promise<void> {
    if (!this.starting) {
      this.starting = this.doStart().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  async restart(): Promise<void> {
    await this.stop();
    this.crashTimes = [];
    await this.start();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.dispose(5000); // shutdown + exit, then kill if it does not go
      } catch (err) {
        this.log.warn(`stopping the server: ${String(err)}`);
      }
    }
    this.status.setState('stopped');
  }

  /** Send the current settings to the running server. */
  async sendSettings(): Promise<void> {
    const client = this.languageClient;
    if (client) {
      await client.sendNotification(DidChangeConfigurationNotification.type, {
        settings: { [settings.SECTION]: settings.serverSettings() },
      });
      this.watchModel(); // a model, device or cache change reloads the model
    }
  }

  private async doStart(): Promise<void> {
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    try {
      this.command = resolveServerCommand(settings.serverCommandSettings(), folders);
    } catch (err) {
      const message = err instanceof ServerNotFoundError ? err.message : String(err);
      this.log.error(message);
      this.status.setState('failed', 'server not found');
      void this.offerFix(message);
      return;
    }
    const command = this.command;
    this.log.info(`starting ${[command.command, ...command.args].join(' ')} (from ${command.source})`);
    this.status.setState('starting');
    this.stderrTail = [];

    const executable: Executable = {
      command: command.command,
      args: command.args,
      options: { env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    };
    const documentSelector = settings.languages().flatMap((language) => [
      { scheme: 'file', language },
      { scheme: 'untitled', language },
    ]);
    const clientOptions: LanguageClientOptions = {
      documentSelector,
      outputChannel: this.log,
      initializationOptions: { [settings.SECTION]: settings.serverSettings() },
      stdioOptions: {
        stdout: (input, channel) => input.on('data', (d: Buffer) => channel.info(d.toString().trimEnd())),
        stderr: (input, channel) => {
          let partial = '';
          input.on('data', (d: Buffer) => {
            const lines = (partial + d.toString()).split(/\r?\n/);
            partial = lines.pop() ?? '';
            for (const line of lines) {
              channel.appendLine(line);
              this.stderrTail.push(line);
            }
            this.stderrTail.splice(0, Math.max(0, this.stderrTail.length - STDERR_TAIL_LINES));
          });
        },
      },
      errorHandler: {
        error: (error: Error, _message: Message | undefined, count: number | undefined): ErrorHandlerResult => {
          this.log.error(`connection error: ${error.message}`);
          return { action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown };
        },
        closed: (): CloseHandlerResult => this.onClosed(),
      },
      middleware: {
        provideInlineCompletionItems: async (document, position, context, token, next) => {
          if (!settings.isEnabled()) {
            return null;
          }
          const t0 = performance.now();
          const result = await next(document, position, context, token);
          const items = Array.isArray(result) ? result : result?.items;
          if (!token.isCancellationRequested && items && items.length > 0) {
            this.status.setLatency(performance.now() - t0);
          }
          return result;
        },
      },
    };

    const client = new LanguageClient('parafill', 'parafill', executable, clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      if (this.client === client && e.newState === State.Running) {
        this.status.setState('running');
        this.watchModel();
      }
    });
    try {
      await client.start();
    } catch (err) {
      if (this.client === client) {
        this.client = undefined;
      }
      await client.dispose().catch(() => undefined);
      const message = explainStartFailure(command, this.stderrTail, err);
      this.log.error(message);
      this.status.setState('failed', 'start failed');
      void this.offerFix(message);
      return;
    }
    const info = client.initializeResult?.serverInfo;
    this.log.info(`server running${info ? `: ${info.name} ${info.version ?? ''}` : ''}`);
    this.status.setState('running');
    this.watchModel();
  }

  /**
   * Follow the model's loading through `parafill/stats` (state loading -> ready | failed) for the status bar.
   * A server without that request is left alone.
   */
  watchModel(): void {
    const client = this.client;
    if (this.modelTimer) {
      clearTimeout(this.modelTimer);
    }
    // `idle` is brief after a start (the load begins on `initialized`) but lasts when inline completions are off
    // or a remote server answers every route: give up on it after a few polls rather than poll forever.
    const poll = async (delayMs: number, idlePollsLeft: number): Promise<void> => {
      if (!client || this.client !== client || client.state !== State.Running) {
        return;
      }
      let model: ModelStatus | undefined;
      try {
        const stats = await client.sendRequest<{ model?: ModelStatus }>(STATS_REQUEST, {});
        model = stats?.model;
      } catch {
        return; // not supported, or the server went away
      }
      if (!model) {
        return;
      }
      this.status.setModelState(model.state, model.error ?? undefined, model.folder, model.device);
      const idle = model.state === 'idle';
      if (model.state === 'loading' || (idle && idlePollsLeft > 0)) {
        const next = idle ? idlePollsLeft - 1 : idlePollsLeft;
        this.modelTimer = setTimeout(() => void poll(Math.min(delayMs * 2, 2000), next), delayMs);
      }
    };
    void poll(250, IDLE_POLLS);
  }

  private onClosed(): CloseHandlerResult {
    const now = Date.now();
    this.crashTimes = this.crashTimes.filter((t) => now - t < RESTART_WINDOW_MS);
    this.crashTimes.push(now);
    const tail = this.stderrTail.filter((l) => /error|exception|traceback/i.test(l)).slice(-1)[0];
    if (this.crashTimes.length <= MAX_RESTARTS) {
      this.log.warn(`the server exited${tail ? ` (${tail})` : ''}; restarting (${this.crashTimes.length}/${MAX_RESTARTS})`);
      this.status.setState('starting', 'restarting after a crash');
      return { action: CloseAction.Restart, handled: true };
    }
    const message = this.command
      ? explainStartFailure(this.command, this.stderrTail)
      : 'parafill: the language server keeps crashing.';
    const full = `${message} It exited ${this.crashTimes.length} times in 3 minutes and will not be restarted; run "parafill: Restart Language Server" after fixing it.`;
    this.log.error(full);
    this.status.setState('failed', 'crashed');
    void this.offerFix(full);
    return { action: CloseAction.DoNotRestart, handled: true };
  }

  private async offerFix(message: string): Promise<void> {
    const choice = await vscode.window.showErrorMessage(message, 'Open Settings', 'Show Log', 'Retry');
    if (choice === 'Open Settings') {
      await vscode.commands.executeCommand('workbench.action.openSettings', '@ext:parafill.parafill parafill.server');
    } else if (choice === 'Show Log') {
      this.log.show();
    } else if (choice === 'Retry') {
      await this.restart();
    }
  }

  dispose(): void {
    if (this.modelTimer) {
      clearTimeout(this.modelTimer);
    }
    void this.stop();
  }
}
