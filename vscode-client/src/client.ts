// The language client: starts `parafill serve` over stdio, restarts it after a crash, forwards settings,
// and times inline completions for the status bar.
import * as readline from 'node:readline';
import type { Readable } from 'node:stream';
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
  Message,
  State,
} from 'vscode-languageclient/node';
import * as settings from './settings';
import {
  explainStartFailure,
  parseLogRecord,
  problemLines,
  resolveServerCommand,
  type ServerCommand,
  ServerNotFoundError,
} from './serverCommand';
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
const START_WAIT_MS = 30_000; // how long stop() lets a starting server finish before disposing it anyway
const LOG_MESSAGE = 'window/logMessage';

/** LogOutputChannel method for each Python log level. */
const LOG_LEVELS: Record<string, 'debug' | 'info' | 'warn' | 'error'> = {
  DEBUG: 'debug',
  INFO: 'info',
  WARNING: 'warn',
  ERROR: 'error',
  CRITICAL: 'error',
};

export class ParafillClient implements vscode.Disposable {
  /** The current client. Events of any other (stopped, being replaced) client are ignored. */
  private client: LanguageClient | undefined;
  private command: ServerCommand | undefined;
  private stderrTail: string[] = [];
  private crashTimes: number[] = [];
  private starting: Promise<void> | undefined;
  /** The server could not be started, or crashed too often: nothing to wait for until a restart. */
  private failed = false;
  private modelTimer: ReturnType<typeof setTimeout> | undefined;
  /** Bumped by each watchModel(): an older poll chain (its request may be in flight) stops at its next step. */
  private modelWatch = 0;

  constructor(
    private readonly log: vscode.LogOutputChannel,
    private readonly status: StatusBar,
  ) {}

  /** The running client, if any (for requests such as explain). */
  get languageClient(): LanguageClient | undefined {
    return this.client?.state === State.Running ? this.client : undefined;
  }

  /**
   * The running client, waiting up to `timeoutMs` for one that is starting (importing the server takes
   * seconds). Undefined when none is running by then, when the start failed, or when `token` is cancelled.
   */
  async whenRunning(timeoutMs: number, token?: vscode.CancellationToken): Promise<LanguageClient | undefined> {
    const deadline = Date.now() + timeoutMs;
    while (!this.languageClient && !this.failed && !token?.isCancellationRequested && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return token?.isCancellationRequested ? undefined : this.languageClient;
  }

  /** Start a server unless one is running or starting. */
  async start(): Promise<void> {
    if (!this.starting && !this.client) {
      const starting = this.doStart().finally(() => {
        if (this.starting === starting) {
          this.starting = undefined;
        }
      });
      this.starting = starting;
    }
    return this.starting;
  }

  async restart(): Promise<void> {
    this.failed = false;
    this.status.setState('starting', 'restarting');
    await this.stop();
    this.crashTimes = [];
    await this.start();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined; // from here on its events are ignored, its start failure included
    this.starting = undefined;
    this.stopWatchingModel();
    if (client) {
      await this.disposeClient(client);
    }
    if (!this.client) {
      this.status.setState('stopped'); // unless a newer start took over meanwhile (a second restart)
    }
  }

  /**
   * Shut a client down (shutdown + exit, then kill if it does not go). One still starting is let finish first:
   * the library cannot stop a starting client, it kills its process 2 s later, and the failed `initialize`
   * then pops up errors of its own.
   */
  private async disposeClient(client: LanguageClient): Promise<void> {
    if (client.state === State.Starting) {
      this.log.info('the server is still starting: stopping it once it has started');
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise((resolve) => (timer = setTimeout(resolve, START_WAIT_MS)));
      await Promise.race([client.start().catch(() => undefined), timeout]);
      clearTimeout(timer);
    }
    try {
      await client.dispose(5000);
    } catch (err) {
      this.log.warn(`stopping the server: ${String(err)}`);
    }
  }

  /** Send the current settings to the running server (a server still starting gets them once it runs). */
  async sendSettings(): Promise<void> {
    const client = this.languageClient;
    if (client) {
      try {
        await client.sendNotification(DidChangeConfigurationNotification.type, {
          settings: { [settings.SECTION]: settings.serverSettings() },
        });
      } catch (err) {
        this.log.warn(`sending settings: ${String(err)}`);
      }
      this.watchModel(); // a model, device or cache change reloads the model
    }
  }

  private async doStart(): Promise<void> {
    this.failed = false;
    try {
      const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
      this.command = resolveServerCommand(settings.serverCommandSettings(), folders);
    } catch (err) {
      this.fail(err instanceof ServerNotFoundError ? err.message : String(err), 'server not found');
      return;
    }
    const command = this.command;
    this.log.info(`starting ${[command.command, ...command.args].join(' ')} (from ${command.source})`);
    this.status.setState('starting');
    const stderrTail: string[] = [];
    this.stderrTail = stderrTail;

    const executable: Executable = {
      command: command.command,
      args: command.args,
      options: { env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    };
    // The handlers below run only once `client` (created after them) exists: bound to it, they ignore the
    // events of a client that has been replaced.
    const current = () => this.client === client;
    // The settings as sent in `initialize`: a function, so that a restart after a crash sends the current ones.
    let initSettings = '';
    const clientOptions: LanguageClientOptions = {
      documentSelector: settings.documentSelector(),
      outputChannel: this.log,
      initializationOptions: () => {
        const values = settings.serverSettings();
        initSettings = JSON.stringify(values);
        return { [settings.SECTION]: values };
      },
      stdioOptions: {
        stdout: (input, channel) => input.on('data', (d: Buffer) => channel.info(d.toString().trimEnd())),
        stderr: (input) => this.followStderr(input, stderrTail),
      },
      connectionOptions: {
        // The server mirrors its `parafill.*` log records as window/logMessage, and writes them all to stderr
        // too. Only stderr is shown (followStderr): it has them all, in order, with logger names and levels, and
        // also what is not a record (tracebacks, output before `initialize` or after the protocol died).
        messageStrategy: {
          handleMessage: (message, next) =>
            Message.isNotification(message) && message.method === LOG_MESSAGE ? undefined : next(message),
        },
      },
      errorHandler: {
        error: (error: Error, _message: Message | undefined, count: number | undefined): ErrorHandlerResult => {
          if (!current()) {
            return { action: ErrorAction.Shutdown, handled: true };
          }
          this.log.error(`connection error: ${error.message}`);
          return { action: count !== undefined && count <= 3 ? ErrorAction.Continue : ErrorAction.Shutdown };
        },
        closed: (): CloseHandlerResult =>
          current() ? this.onClosed() : { action: CloseAction.DoNotRestart, handled: true, message: 'a replaced server exited' },
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
    // Running: after the first start and after each restart that follows a crash.
    client.onDidChangeState((e) => {
      if (current() && e.newState === State.Running) {
        this.status.setState('running');
        // Settings changed while the server was starting (it takes seconds to answer `initialize`).
        if (JSON.stringify(settings.serverSettings()) !== initSettings) {
          void this.sendSettings();
        } else {
          this.watchModel();
        }
      }
    });
    try {
      await client.start();
    } catch (err) {
      if (!current()) {
        return; // stopped on purpose (a restart): not a failure to report
      }
      this.client = undefined;
      await client.dispose().catch(() => undefined);
      this.fail(explainStartFailure(command, stderrTail, err), 'start failed');
      return;
    }
    if (current()) {
      const info = client.initializeResult?.serverInfo;
      this.log.info(`server running${info ? `: ${info.name} ${info.version ?? ''}` : ''}`);
    }
  }

  /**
   * The server's stderr into the log, line by line (readline decodes UTF-8 across chunks), each record at its
   * own level; other lines (a traceback) at error inside a traceback or after an error record, else at warn.
   * The last lines are kept in `tail` to explain a failed start or a crash.
   */
  private followStderr(input: Readable, tail: string[]): void {
    let extraLevel: 'warn' | 'error' = 'warn';
    readline.createInterface({ input, crlfDelay: Infinity, terminal: false }).on('line', (line) => {
      const record = parseLogRecord(line);
      if (record) {
        const level = LOG_LEVELS[record.level] ?? 'info';
        this.log[level](record.text);
        extraLevel = level === 'error' ? 'error' : 'warn';
      } else if (line.trim()) {
        if (line.startsWith('Traceback')) {
          extraLevel = 'error';
        }
        this.log[extraLevel](line);
      }
      tail.push(line);
      tail.splice(0, Math.max(0, tail.length - STDERR_TAIL_LINES));
    });
  }

  /** The server cannot run: log, status bar, and a message with the fixes. */
  private fail(message: string, detail: string): void {
    this.failed = true;
    this.log.error(message);
    this.status.setState('failed', detail);
    void this.offerFix(message);
  }

  /**
   * Follow the model's loading through `parafill/stats` (state loading -> ready | failed) for the status bar.
   * A server without that request is left alone.
   */
  watchModel(): void {
    const client = this.client;
    this.stopWatchingModel();
    const generation = this.modelWatch;
    if (!client) {
      return;
    }
    // `idle` is brief after a start (the load begins on `initialized`) but lasts when inline completions are off
    // or a remote server answers every route: give up on it after a few polls rather than poll forever.
    const stale = () => generation !== this.modelWatch || this.client !== client || client.state !== State.Running;
    const poll = async (delayMs: number, idlePollsLeft: number): Promise<void> => {
      if (stale()) {
        return;
      }
      let model: ModelStatus | undefined;
      try {
        const stats = await client.sendRequest<{ model?: ModelStatus }>(STATS_REQUEST, {});
        model = stats?.model;
      } catch {
        if (!stale()) {
          this.status.setModelUnreported(); // not supported (a server that went away is no longer running)
        }
        return;
      }
      if (stale()) {
        return; // a newer watch took over while this request was in flight
      }
      if (!model) {
        this.status.setModelUnreported(); // a stats answer without the model part
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

  private stopWatchingModel(): void {
    this.modelWatch++;
    if (this.modelTimer) {
      clearTimeout(this.modelTimer);
      this.modelTimer = undefined;
    }
  }

  private onClosed(): CloseHandlerResult {
    const now = Date.now();
    this.crashTimes = this.crashTimes.filter((t) => now - t < RESTART_WINDOW_MS);
    this.crashTimes.push(now);
    const tail = problemLines(this.stderrTail).slice(-1)[0];
    if (this.crashTimes.length <= MAX_RESTARTS) {
      this.log.warn(`the server exited${tail ? ` (${tail})` : ''}; restarting (${this.crashTimes.length}/${MAX_RESTARTS})`);
      this.status.setState('starting', 'restarting after a crash');
      return { action: CloseAction.Restart, handled: true };
    }
    const message = this.command
      ? explainStartFailure(this.command, this.stderrTail, undefined, true)
      : 'parafill: the language server keeps crashing.';
    this.fail(
      `${message} It exited ${this.crashTimes.length} times in 3 minutes and will not be restarted; run "parafill: Restart Language Server" after fixing it.`,
      'crashed',
    );
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
    this.stopWatchingModel();
    void this.stop();
  }
}
