// "parafill: Explain Selection": sends `parafill/explain` with a work-done token and streams the `$/progress`
// reports into the "parafill Explain" output as they arrive; cancellable from the progress notification.
import * as vscode from 'vscode';
import { type LanguageClient, WorkDoneProgress } from 'vscode-languageclient/node';
import * as path from 'node:path';
import * as settings from './settings';

export const EXPLAIN_METHOD = 'parafill/explain';
const START_WAIT_MS = 30_000; // the server answers `initialize` within seconds; the model loads after that

/** The part of ParafillClient that explain uses. */
export interface ServerHandle {
  readonly languageClient: LanguageClient | undefined;
  whenRunning(timeoutMs: number, token?: vscode.CancellationToken): Promise<LanguageClient | undefined>;
}

interface ExplainResult {
  text?: string;
}

export class ExplainController implements vscode.Disposable {
  private readonly channel: vscode.OutputChannel;
  private current: vscode.CancellationTokenSource | undefined;
  private counter = 0;

  constructor(private readonly server: ServerHandle) {
    this.channel = vscode.window.createOutputChannel('parafill Explain', 'markdown');
  }

  async explainSelection(): Promise<string | undefined> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vscode.window.showInformationMessage('parafill: open a file and select the code to explain.');
      return undefined;
    }
    const document = editor.document;
    // The server only has the documents of `parafill.languages` (the client's document selector).
    if (!vscode.languages.match(settings.documentSelector(), document)) {
      void vscode.window.showInformationMessage(
        `parafill: Explain works in files of the languages in "parafill.languages" (${settings.languages().join(', ')}); ` +
          `this file is ${document.languageId}. Add it to that setting to explain it.`,
      );
      return undefined;
    }
    let range: vscode.Range = editor.selection;
    if (editor.selection.isEmpty) {
      // Nothing selected: explain the cursor's line.
      range = document.lineAt(editor.selection.active.line).range;
    }
    const client = await this.runningClient(); // the range is taken first: the wait can take seconds
    if (!client) {
      return undefined;
    }
    this.current?.cancel();
    const cts = new vscode.CancellationTokenSource();
    this.current = cts;

    // A selection that ends at column 0 does not include that line.
    const lastLine = range.end.character === 0 && range.end.line > range.start.line ? range.end.line : range.end.line + 1;
    const where = `${path.basename(document.uri.fsPath || document.uri.path)}:${range.start.line + 1}-${lastLine}`;
    this.channel.clear();
    this.channel.append(`# Explain ${where}\n\n`);
    this.channel.show(true);

    const token = `parafill-explain-${Date.now()}-${++this.counter}`;
    // Each report's message is the text added since the previous report (lsp_server/progress.py).
    let streamed = '';
    const progress = client.onProgress(WorkDoneProgress.type, token, (value) => {
      if (value.kind === 'report' && value.message && !cts.token.isCancellationRequested) {
        streamed += value.message;
        this.channel.append(value.message);
      }
    });

    try {
      return await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `parafill: explaining ${where}`, cancellable: true },
        async (_progress, notificationToken) => {
          const sub = notificationToken.onCancellationRequested(() => cts.cancel());
          try {
            const params = {
              textDocument: { uri: client.code2ProtocolConverter.asUri(document.uri) },
              range: client.code2ProtocolConverter.asRange(range),
              workDoneToken: token,
            };
            const result = await client.sendRequest<ExplainResult | string | null>(EXPLAIN_METHOD, params, cts.token);
            if (cts.token.isCancellationRequested) {
              // The client answers a cancelled request with null (or throws, handled below).
              throw new vscode.CancellationError();
            }
            const text = typeof result === 'string' ? result : (result?.text ?? '');
            if (text && text !== streamed) {
              // The response is authoritative: show it whole if the stream missed or reordered anything.
              this.channel.replace(`# Explain ${where}\n\n${text}`);
            }
            this.channel.append('\n');
            return text;
          } finally {
            sub.dispose();
          }
        },
      );
    } catch (err) {
      if (cts.token.isCancellationRequested) {
        // Superseded by a newer explain: the channel is that one's now, so say nothing in it.
        if (this.current === cts) {
          this.channel.append('\n\n_(cancelled)_\n');
        }
        return undefined;
      }
      const message = err instanceof Error ? err.message : String(err);
      this.channel.append(`\n\n_(failed: ${message})_\n`);
      void vscode.window.showErrorMessage(`parafill: explain failed: ${message}`);
      return undefined;
    } finally {
      progress.dispose();
      if (this.current === cts) {
        this.current = undefined;
      }
      cts.dispose();
    }
  }

  /** The running client; while the server starts, wait for it (cancellable, with a notification). */
  private async runningClient(): Promise<LanguageClient | undefined> {
    let cancelled = false;
    const client =
      this.server.languageClient ??
      (await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: 'parafill: waiting for the language server to start…', cancellable: true },
        async (_progress, token) => {
          const found = await this.server.whenRunning(START_WAIT_MS, token);
          cancelled = token.isCancellationRequested;
          return found;
        },
      ));
    if (!client && !cancelled) {
      void vscode.window.showErrorMessage(
        'parafill: the language server is not running. Run "parafill: Show Server Log" to see why.',
      );
    }
    return client;
  }

  dispose(): void {
    this.current?.cancel();
    this.channel.dispose();
  }
}
