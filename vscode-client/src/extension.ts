// parafill for VS Code: ghost-text completions and streamed explanations from the parafill language server.
import * as vscode from 'vscode';
import { ParafillClient } from './client';
import { ExplainController } from './explain';
import * as settings from './settings';
import { StatusBar } from './statusBar';

let parafill: ParafillClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<{ explainSelection: () => Promise<string | undefined> }> {
  const log = vscode.window.createOutputChannel('parafill', { log: true });
  const status = new StatusBar();
  status.setEnabled(settings.isEnabled());
  status.setModel(settings.modelLabel(), vscode.workspace.getConfiguration(settings.SECTION).get<string>('device', ''));
  parafill = new ParafillClient(log, status);
  const explain = new ExplainController(parafill);
  setLanguagesContext();

  context.subscriptions.push(
    log,
    status,
    parafill,
    explain,
    vscode.commands.registerCommand('parafill.explainSelection', () => explain.explainSelection()),
    vscode.commands.registerCommand('parafill.toggle', () => toggle(log)),
    vscode.commands.registerCommand('parafill.restartServer', () => parafill?.restart()),
    vscode.commands.registerCommand('parafill.showLog', () => log.show()),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration(settings.SECTION)) {
        return;
      }
      status.setEnabled(settings.isEnabled());
      status.setModel(settings.modelLabel(), vscode.workspace.getConfiguration(settings.SECTION).get<string>('device', ''));
      if (event.affectsConfiguration(`${settings.SECTION}.languages`)) {
        setLanguagesContext();
      }
      if (settings.needsRestart(event)) {
        await parafill?.restart();
      } else {
        await parafill?.sendSettings();
      }
    }),
  );

  void parafill.start(); // not awaited: importing torch takes seconds, activation should not
  return { explainSelection: () => explain.explainSelection() };
}

/** Turn inline completions off or on (status bar click or command), saying so in the log; a failed write is shown. */
async function toggle(log: vscode.LogOutputChannel): Promise<void> {
  const enable = !settings.isEnabled();
  const what = `inline completions ${enable ? 'on' : 'off'}`;
  log.info(`turning ${what}`);
  try {
    await settings.setEnabled(enable);
  } catch (err) {
    log.error(`could not turn ${what}: ${String(err)}`);
    void vscode.window.showErrorMessage(`parafill: could not turn ${what}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** For the editor context menu's `when` (package.json): Explain only in the languages the server gets. */
function setLanguagesContext(): void {
  void vscode.commands.executeCommand('setContext', 'parafill.languages', settings.languages());
}

export async function deactivate(): Promise<void> {
  await parafill?.stop();
  parafill = undefined;
}
