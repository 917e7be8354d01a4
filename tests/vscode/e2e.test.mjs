// End-to-end in a real VS Code: code-server + headless Chromium (playwright-core). Installs the packaged .vsix,
// opens a Python file, types, waits for ghost text from the model, accepts it with Tab, saves and reads the file;
// runs "parafill: Explain Selection" (on a random-weight model, switched to in the Settings editor) and watches
// the text stream in, and cancels one; is told which languages Explain serves in a text file; restarts a slow-
// starting server while it starts and explains at once (no false crash, Explain waits); runs a server without
// parafill/stats (the status bar does not spin forever); toggles completions from
// the status bar; kills the server and sees it come back with the current settings; breaks the server path and
// sees the fix offered; checks the page talked only to 127.0.0.1. Saves a
// screenshot of the ghost text (test-artifacts/ghost-text.png) and prints the median keystroke -> visible ghost
// text time.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CodeServer } from './codeServer.mjs';
import {
  ARTIFACTS,
  CLIENT_DIR,
  median,
  pythonExecutable,
  randomModelFolder,
  resolves,
  retryUntil,
  ROOT,
  removeRandomModels,
  serverExecutable,
  sleep,
  testModelFolder,
  waitFor,
} from './helpers.mjs';
import { CTRL, Workbench, asRendered, launchBrowser } from './workbench.mjs';

const VSIX = process.env.PARAFILL_VSIX || path.join(CLIENT_DIR, 'parafill.vsix');
const FILE = 'sample.py';
const AFTER_RESTART = 'restarted.py';
const TEXT_FILE = 'notes.txt';
// Relative paths in the workspace, set as such in the settings: a server that sleeps before it starts, and a
// link to the test model.
const SLOW_SERVER = 'bin/slow-parafill';
const STATSLESS_SERVER = 'bin/statsless-parafill';
const MODEL_LINK = 'model-link';
const SOURCE = `"""A small module for the parafill end-to-end test."""


def add(a, b):
    """Return the sum of a and b."""
    return a + b


class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)


`;
// Top-level lines typed one after another (none opens a block, so Enter returns to column 0).
const TRIALS = ['total = add', 'stack = Stack', 'import o', 'value = stack.', 'numbers = [', 'print', 'name = ', 'result = add'];
const N_TRIALS = Number(process.env.PARAFILL_E2E_TRIALS ?? TRIALS.length);

describe('parafill in VS Code (code-server + headless Chromium)', () => {
  let server;
  let context;
  let page;
  let wb;
  let workspace;
  let browserProfile;
  const hosts = new Set();
  const notes = [];

  const settingsFile = () => server.readSettings();
  // Change settings in the Settings editor; when `folder` is another model, wait until the server has loaded it.
  let currentModel = testModelFolder();
  const switchModel = async (folder, extra = []) => {
    const loaded = `model loaded from ${folder}`;
    const loads = () => server.extensionLogLines(loaded).length;
    const before = loads();
    const change = folder === currentModel ? [] : [['parafill.model', folder]];
    await wb.setSettings([...change, ...extra], settingsFile);
    if (change.length) {
      // On a timeout, the log says why (a load error, or no settings change reached the server).
      await waitFor(() => loads() > before, 120_000, `the model in ${folder} to load`, 250).catch((err) => {
        throw new Error(`${err.message}\n${server.extensionLog()}`);
      });
      currentModel = folder;
    }
    // The status bar learns of the load by polling parafill/stats (up to 2 s after the log line); until then it
    // shows the spinner, and a click on it opens the log instead of toggling.
    await waitFor(async () => (await wb.statusIcon()) === 'codicon-sparkle', 20_000, 'the status bar to show the model ready');
    await wb.press(`${CTRL}+W`); // the Settings editor
  };

  // Done when the progress notification is gone and the explain output has not changed for a second.
  const explanationFinished = async () => {
    const running = page.locator('.notification-toast', { hasText: 'explaining' });
    await waitFor(
      async () => (await running.count()) === 0 && (await wb.outputQuietMs()) > 1000,
      180_000,
      'the explanation to finish',
      100,
    );
  };

  before(async () => {
    assert.ok(fs.existsSync(VSIX), `${VSIX} is missing: run \`npm run build && npm run package\` in vscode-client`);
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    workspace = fs.mkdtempSync(path.join(os.tmpdir(), 'parafill-e2e-ws-'));
    fs.writeFileSync(path.join(workspace, FILE), SOURCE);
    fs.writeFileSync(path.join(workspace, TEXT_FILE), 'Shopping list: apples, pears.\n');
    fs.mkdirSync(path.join(workspace, 'bin'));
    fs.writeFileSync(
      path.join(workspace, SLOW_SERVER),
      `#!/bin/sh\n# parafill, 4 s late: time to restart it while it starts\nsleep 4 </dev/null >/dev/null 2>&1\nexec '${serverExecutable()}' "$@"\n`,
      { mode: 0o755 },
    );
    fs.writeFileSync(
      path.join(workspace, STATSLESS_SERVER),
      `#!/bin/sh\n# parafill without parafill/stats, as another LSP server would be\n` +
        `PYTHONPATH='${ROOT}' exec '${pythonExecutable()}' -m tests.lsp.statsless_server "$@"\n`,
      { mode: 0o755 },
    );
    fs.symlinkSync(testModelFolder(), path.join(workspace, MODEL_LINK));
    server = new CodeServer({
      workspace,
      settings: {
        'parafill.server.path': serverExecutable(),
        'parafill.model': testModelFolder(),
        'parafill.timeBudgetMs': 3000,
        // fp32, not the bf16 default of CPUs with native bf16: the random model's long, loop-free explanation
        // that the Explain tests rely on was measured in fp32 (in bf16 one ended before Cancel was clicked).
        'parafill.dtype': 'float32',
        'parafill.explain.maxTokens': 160,
      },
    });
    await server.installExtension(VSIX);
    await server.start();
    browserProfile = fs.mkdtempSync(path.join(os.tmpdir(), 'parafill-chromium-'));
    ({ context, page } = await launchBrowser(browserProfile, hosts));
    page.on('pageerror', (err) => notes.push(`page error: ${err.message}`));
    wb = new Workbench(page);
    await wb.open(server.url);
  });

  after(async () => {
    // The last state of the window, for when a test failed (not committed; ghost-text.png is copied by hand).
    await page?.screenshot({ path: path.join(ARTIFACTS, 'last-state.png') }).catch(() => undefined);
    await context?.close().catch(() => undefined);
    await server?.stop();
    if (notes.length) {
      console.log(notes.join('\n'));
    }
    if (process.env.PARAFILL_E2E_KEEP) {
      console.log(`kept ${server?.base} and ${workspace}`);
    } else {
      server?.cleanup();
      for (const dir of [workspace, browserProfile].filter(Boolean)) {
        fs.rmSync(dir, { recursive: true, force: true });
      }
      removeRandomModels();
    }
  });

  test('the .vsix is installed, the extension starts the server, the model loads', async () => {
    await waitFor(async () => (await wb.statusText())?.includes('parafill'), 60_000, 'the parafill status bar item');
    await waitFor(
      async () => {
        const icon = await wb.statusIcon();
        if (icon === 'codicon-error' || icon === 'codicon-warning') {
          throw new Error(`status bar shows ${icon}: ${await wb.statusText()}\n${server.extensionLog()}`);
        }
        return icon === 'codicon-sparkle';
      },
      180_000,
      'the status bar to show the model ready',
    );
    notes.push(`status bar when ready: ${await wb.statusText()}`);
    // The log file lags the status bar by a flush.
    await waitFor(() => /model loaded from/.test(server.extensionLog()), 10_000, '"model loaded from" in the log');
    // Every setting the extension sends is one the server knows and accepts.
    const log = server.extensionLog();
    assert.ok(!/unknown setting|keeping/.test(log), `the server rejected settings:\n${log}`);
    // Each server log record once (stderr only, not also its window/logMessage copy), at its level, with its logger.
    const loaded = server.extensionLogLines('model loaded from');
    assert.equal(loaded.length, 1, `one model load, logged ${loaded.length} times:\n${loaded.join('\n')}`);
    assert.match(loaded[0], /\[info\] parafill\.model: model loaded from /);
  });

  test('open a Python file, type, ghost text appears; median keystroke -> ghost time', async () => {
    await wb.openFile(FILE, 'class Stack');
    await wb.press(`${CTRL}+End`);
    // Warm-up: the first completion on a file prefills it all (not counted).
    const cold = await retryUntil('the first ghost text', 3, (n) => wb.typeAndTime(n === 1 ? 'def multiply' : 'x', 20_000), {
      describe: async () => `status ${JSON.stringify(await wb.statusText())}`,
    }).catch((err) => {
      throw new Error(`${err.message}\n${server.extensionLog()}`);
    });
    notes.push(`first completion (cold prefix cache): ${cold.ms.toFixed(0)} ms`);
    await wb.press('Escape', 'End', 'Enter');

    const latencies = [];
    const requestLatencies = [];
    for (const trial of TRIALS.slice(0, N_TRIALS)) {
      const r = await wb.typeAndTime(trial, 15_000);
      // The extension's own measure of the request that produced it (status bar: "· N ms").
      const request = Number((await wb.statusText())?.match(/(\d+) ms/)?.[1] ?? NaN);
      if (r && !r.visibleAtKey) {
        latencies.push(r.ms);
        requestLatencies.push(request);
      }
      const seen = r ? `${r.ms.toFixed(0)} ms (LSP request ${request} ms)` : 'no ghost text';
      notes.push(`  ${JSON.stringify(trial)}: ${seen}${r?.visibleAtKey ? ' (ghost already visible: not counted)' : ''}`);
      await wb.press('Escape', 'End', 'Enter');
      await sleep(300);
    }
    assert.ok(latencies.length >= Math.min(3, N_TRIALS), `ghost text in only ${latencies.length} trials:\n${notes.join('\n')}`);
    const med = median(latencies);
    notes.push(
      `keystroke -> visible ghost text: median ${med.toFixed(0)} ms over ${latencies.length} completions ` +
        `(LSP request as the extension timed it: median ${median(requestLatencies).toFixed(0)} ms)`,
    );
    console.log(`PARAFILL_E2E_MEDIAN_GHOST_MS=${med.toFixed(1)} (n=${latencies.length})`);
    assert.match((await wb.statusText()) ?? '', /parafill .*\d+ ms/, 'the status bar shows the last latency');
  });

  test('Tab accepts the ghost text, and the saved file contains it (screenshot saved)', async () => {
    // A new method in class Stack first (after line 14, `self.items.append(item)`), then top-level fallbacks.
    const inClass = async () => {
      await wb.press('Escape', `${CTRL}+G`);
      await page.keyboard.type('14');
      // Shift+Tab: from the method body's indent back to the class's.
      await wb.press('Enter', 'End', 'Enter', 'Enter', 'Shift+Tab');
    };
    const atEnd = () => wb.press('Escape', `${CTRL}+End`, 'Enter', 'Enter');
    const candidates = [
      [inClass, 'def pop(self):\n'],
      [inClass, 'def peek(self):\n'],
      [atEnd, 'def subtract(a, b):'],
      [atEnd, 'def size'],
      [atEnd, 'z = '],
    ];
    let ghost;
    for (const [setup, typed] of candidates) {
      await setup();
      if (!(await wb.typeAndTime(typed, 15_000))) {
        continue;
      }
      const g = await wb.ghostText();
      if (g.inline.trim() || g.lines.some((l) => l.trim())) {
        ghost = { typed, ...g };
        break;
      }
    }
    assert.ok(ghost, 'no ghost text to accept');
    await page.screenshot({ path: path.join(ARTIFACTS, 'ghost-text.png') });
    await wb.press('Tab', 'Escape');

    // What precedes the ghost text on its line is the typed text after its last newline.
    const expected = asRendered(ghost.typed.split('\n').at(-1) + ghost.inline);
    const expectedLines = ghost.lines.filter((l) => l.trim()).map((l) => asRendered(l).trimEnd());
    const hasAll = (text) => text.includes(expected) && expectedLines.every((l) => text.includes(l));
    const file = path.join(workspace, FILE);
    const unsaved = fs.readFileSync(file, 'utf8');
    await wb.press(`${CTRL}+S`);
    await waitFor(
      () => {
        const now = fs.readFileSync(file, 'utf8');
        return now !== unsaved && hasAll(asRendered(now));
      },
      10_000,
      'the saved file to contain the accepted text',
    ).catch(() => undefined);
    const saved = asRendered(fs.readFileSync(file, 'utf8'));
    const savedLine = saved.split('\n').find((l) => l.includes(ghost.typed.split('\n')[0]));
    assert.ok(saved.includes(expected), `accepted ${JSON.stringify(expected)} not in the saved file (${JSON.stringify(savedLine)})`);
    for (const line of expectedLines) {
      assert.ok(saved.includes(line), `accepted line ${JSON.stringify(line)} not in the saved file:\n${saved}`);
    }
    notes.push(`accepted after ${JSON.stringify(ghost.typed)}: ${JSON.stringify([ghost.inline, ...ghost.lines].join('\n'))}`);
  });

  // The two Explain tests run on a random-weight model that cannot end an answer by itself ("rambling": no
  // end-of-text, no closing quotes), so an explanation lasts until its token limit: long enough to watch it
  // stream and to click Cancel. The shipped model's ends after a few words; a plain random model's ends within
  // a few hundred tokens, at a point that float noise moves (a prefix-cache hit or not), which made the Cancel
  // click land after the end in some runs. The protocol test explains with the shipped model (and cancels on
  // the rambling one).
  test('Explain Selection streams the explanation into the "parafill Explain" output', async () => {
    await switchModel(randomModelFolder('rambling'));
    await wb.selectFirstLines(6);
    await wb.takeOutputVersions();
    await wb.runCommand('parafill: Explain Selection');
    await waitFor(async () => (await wb.outputVersionCount()) > 0, 20_000, 'the explain output');
    await explanationFinished();
    const header = '# Explain sample.py:1-6';
    const bodies = (await wb.takeOutputVersions()).filter((v) => v.text.replace(header, '').trim().length > 0);
    assert.ok(bodies.length > 0, 'no explanation text');
    const spanMs = bodies.at(-1).t - bodies[0].t;
    notes.push(`explain: ${bodies.length} successive versions of the text over ${spanMs.toFixed(0)} ms`);
    assert.ok(bodies.length >= 2, 'the explanation did not stream (one version of the text only)');
  });

  test('Explain Selection is cancelled from its notification', async (t) => {
    // 3000 tokens take about 24 s: the explanation is still running when the click lands.
    await switchModel(randomModelFolder('rambling'), [['parafill.explain.maxTokens', 3000]]);
    t.after(() => switchModel(testModelFolder(), [['parafill.explain.maxTokens', 160]]));
    const ended = /parafill\.service: explain: /;
    const endedBefore = server.extensionLogLines(ended).length;
    await wb.selectFirstLines(14);
    await wb.takeOutputVersions();
    await wb.runCommand('parafill: Explain Selection');
    const toast = page.locator('.notification-toast', { hasText: 'explaining' });
    await waitFor(async () => (await wb.outputVersionCount()) > 1, 30_000, 'the explanation to start streaming');
    // One CI run on a loaded machine saw no "(cancelled)" within 10 s of the click, and its rerun passed; the
    // cause was not established. Click again while the toast is still there (a click the page lost leaves it
    // up); a Cancel button that does nothing still fails at the third.
    const cancel = toast.getByRole('button', { name: 'Cancel' });
    await retryUntil(
      'a Cancel click followed by (cancelled) in the output',
      3,
      async () => {
        await cancel.click({ force: true, timeout: 10_000 });
        return resolves(waitFor(() => wb.outputSays('(cancelled)'), 10_000, 'the output to say (cancelled)'));
      },
      {
        beforeRetry: async () => {
          if ((await toast.count()) === 0) {
            throw new Error('no (cancelled) in the output 10 s after a Cancel click, and the notification is gone');
          }
        },
      },
    );
    await toast.waitFor({ state: 'detached', timeout: 10_000 });
    // The server stopped its work too (the decoder saw the cancel), not only the client its display.
    await waitFor(() => server.extensionLogLines(ended).length > endedBefore, 10_000, "the server's explain line");
    const line = server.extensionLogLines(ended).at(-1);
    assert.match(line, /\(cancelled\)/, `the explanation did not end by the cancel: ${line}`);
  });

  test('Explain Selection in a file outside parafill.languages says which languages are served', async () => {
    await wb.openFile(TEXT_FILE, 'Shopping list');
    await wb.selectFirstLines(1);
    await wb.runCommand('parafill: Explain Selection');
    const message = wb.notification('parafill.languages').first();
    await message.waitFor({ timeout: 10_000 });
    const text = (await message.textContent()) ?? '';
    assert.match(text, /\(python\)/);
    assert.match(text, /plaintext/);
    assert.equal(await wb.notification('explain failed').count(), 0);
    await wb.runCommand('Notifications: Clear All Notifications');
    await wb.press(`${CTRL}+W`);
  });

  test('restarted while it starts: no false crash or error; Explain waits for the new server', async () => {
    const slow = path.join(workspace, SLOW_SERVER);
    const falseAlarms = /restarting \(|failed to start|crashed|initialization failed|couldn't create connection/i;
    const alarmsBefore = server.extensionLogLines(falseAlarms).length;
    const stillStarting = () => server.extensionLogLines('the server is still starting').length;
    const hitBefore = stillStarting();
    // A relative server.path: the extension resolves it against the workspace folder.
    await wb.setSettings([['parafill.server.path', SLOW_SERVER]], settingsFile);
    await wb.press(`${CTRL}+W`);
    await waitFor(() => server.extensionLogLines(`starting ${slow} serve`).length > 0, 20_000, `a start of ${slow}`, 100);
    // It sleeps 4 s before the server even loads: restart it now, and ask for an explanation at once.
    await wb.runCommand('parafill: Restart Language Server');
    await wb.selectFirstLines(6);
    await wb.takeOutputVersions();
    const asked = Date.now();
    await wb.runCommand('parafill: Explain Selection');
    await waitFor(() => wb.outputSays('# Explain sample.py:1-6'), 60_000, 'Explain to get a running server');
    notes.push(`explain during a restart: the server was there after ${Date.now() - asked} ms`);
    await explanationFinished();
    const header = '# Explain sample.py:1-6';
    const last = (await wb.takeOutputVersions()).at(-1)?.text ?? '';
    const body = last.replace(header, '').trim();
    assert.ok(body && !body.includes('_(failed'), `no explanation: ${JSON.stringify(last)}`);
    assert.equal(await wb.notification('not running').count(), 0, 'Explain did not wait for the server');
    assert.ok(stillStarting() > hitBefore, 'the restart did not land while the server was starting');
    // The server stopped while starting is not taken for a crash, nor for a failed start.
    const alarms = server.extensionLogLines(falseAlarms).slice(alarmsBefore);
    assert.deepEqual(alarms, [], 'false alarms in the log');
    for (const text of ['failed to start', 'crashed', 'initialization failed', "couldn't create connection", 'Pending response']) {
      assert.equal(await wb.notification(text).count(), 0, `a notification says "${text}"`);
    }
    await waitFor(async () => (await wb.statusIcon()) === 'codicon-sparkle', 20_000, 'the status bar to show the model ready');
    await waitFor(() => server.languageServerPids().length === 1, 20_000, 'one server process (the replaced one gone)', 250);

    const ownPathStarts = () => server.extensionLogLines(`starting ${serverExecutable()} serve`).length;
    const startsBefore = ownPathStarts();
    await wb.setSettings([['parafill.server.path', serverExecutable()]], settingsFile);
    await wb.press(`${CTRL}+W`);
    await waitFor(
      async () =>
        ownPathStarts() > startsBefore && server.languageServerPids().length === 1 && (await wb.statusIcon()) === 'codicon-sparkle',
      120_000,
      'the server back on its own path',
      250,
    );
  });

  test('a server without parafill/stats: the status bar stops checking the model and shows on', async () => {
    // The extension polls parafill/stats for the model's state; a server that answers "method not found" is
    // taken at its word (src/client.ts watchModel -> setModelUnreported) instead of spinning forever.
    const statsless = path.join(workspace, STATSLESS_SERVER);
    const starts = (exe) => server.extensionLogLines(`starting ${exe} serve`).length;
    const running = () => server.extensionLogLines('server running').length;
    const runningBefore = running();
    await wb.setSettings([['parafill.server.path', STATSLESS_SERVER]], settingsFile);
    await wb.press(`${CTRL}+W`);
    await waitFor(() => starts(statsless) > 0, 20_000, `a start of ${statsless}`, 100);
    await waitFor(() => running() > runningBefore, 60_000, 'the stats-less server to run', 100);
    // From here the item shows "checking" (a spinner) until parafill/stats is answered: here, never.
    await waitFor(async () => (await wb.statusIcon()) === 'codicon-sparkle', 20_000, 'the status bar to show on').catch(
      async (err) => {
        throw new Error(`${err.message}: status ${JSON.stringify(await wb.statusText())} (${await wb.statusIcon()})\n${server.extensionLog()}`);
      },
    );
    const startsBefore = starts(serverExecutable());
    await wb.setSettings([['parafill.server.path', serverExecutable()]], settingsFile);
    await wb.press(`${CTRL}+W`);
    await waitFor(
      async () =>
        starts(serverExecutable()) > startsBefore && server.languageServerPids().length === 1 && (await wb.statusIcon()) === 'codicon-sparkle',
      120_000,
      'the server back on its own path',
      250,
    );
  });

  test('clicking the status bar item turns inline completions off, and on again', async () => {
    await waitFor(async () => (await wb.statusIcon()) === 'codicon-sparkle', 20_000, 'the status bar to show on');
    await clickStatusToTurn(false);
    await wb.focusEditor();
    await wb.press(`${CTRL}+End`, 'Enter');
    assert.equal(await wb.typeAndTime('off = add', 4000), undefined, 'ghost text while turned off');
    await clickStatusToTurn(true);
  });

  /**
   * Wait until the status bar item shows `icon` and its text has not changed for 600 ms. Why: a click on the item
   * toggles only in the "on" and "off" states; while it spins (server starting, model being checked or loaded) it
   * shows the log (src/statusView.ts). With the machine loaded (an eval beside the suite) the item went from the
   * sparkle back to its spinner after the previous test; at least the first two of 3 clicks landed there, lost.
   */
  async function statusSteadyAt(icon) {
    let last;
    let since = Date.now();
    await waitFor(
      async () => {
        const now = `${await wb.statusIcon()} ${await wb.statusText()}`;
        if (now !== last) {
          last = now;
          since = Date.now();
        }
        return now.startsWith(`${icon} `) && Date.now() - since >= 600;
      },
      30_000,
      `the status bar item to show ${icon} and stop changing`,
      100,
    ).catch((err) => {
      throw new Error(`${err.message}: last seen ${JSON.stringify(last)}\n${server.extensionLog()}`);
    });
  }

  /**
   * Click the status bar item to turn completions on or off; the icon must follow at once (src/statusView.ts) and
   * settings.json must hold the value. A click that did not reach the toggle command (no log line, no setting
   * written, icon unchanged) is tried again, and the log says so. Why: in 1 CI run and 1 of 7 runs here the icon
   * had not changed 10 s after a click, with no more to go on; these lines tell the two causes apart next time.
   * A command that ran but left the icon or settings.json unchanged fails.
   */
  async function clickStatusToTurn(enabled) {
    const word = enabled ? 'on' : 'off';
    const icon = enabled ? 'codicon-sparkle' : 'codicon-circle-slash';
    const requests = () => server.extensionLogLines(`turning inline completions ${word}`).length;
    const before = requests();
    const reached = async () =>
      requests() > before || server.readSettings()?.['parafill.enable'] === enabled || (await wb.statusIcon()) === icon;
    const state = async () =>
      `status ${JSON.stringify(await wb.statusText())} (${await wb.statusIcon()}), parafill.enable = ` +
      `${server.readSettings()?.['parafill.enable']}, notifications ${JSON.stringify(await wb.page.locator('.notification-list-item').allInnerTexts())}`;
    const clickable = enabled ? 'codicon-circle-slash' : 'codicon-sparkle';
    const clickReaches = async () => {
      await statusSteadyAt(clickable);
      await wb.statusItem().click();
      return resolves(waitFor(reached, 3_000, 'the toggle command', 100));
    };
    await retryUntil(`a status bar click reaching the toggle command (turning ${word})`, 3, clickReaches, {
      describe: state,
    }).catch((err) => {
      throw new Error(`${err.message}\n${server.extensionLog()}`);
    });
    await waitFor(async () => (await wb.statusIcon()) === icon, 10_000, `the status bar to show ${word}`).catch(async (err) => {
      throw new Error(`${err.message}: ${await state()}\n${server.extensionLog()}`);
    });
    await waitFor(() => server.readSettings()?.['parafill.enable'] === enabled, 10_000, `parafill.enable = ${enabled} in settings.json`);
  }

  test('a crashed server is restarted with the current settings and completions come back', async () => {
    // A fresh copy of the test file and the lines of the latency test: with greedy decoding the new server
    // answers them as the first one did, whatever the earlier tests typed into sample.py. Written before the
    // crash, so the workbench's file search has seen it by the time Quick Open looks (one run timed out there).
    fs.writeFileSync(path.join(workspace, AFTER_RESTART), SOURCE);
    // A model setting changed since the server started (and relative: resolved against the workspace folder):
    // the restarted server must load it, not the model of its first start.
    const linked = path.join(workspace, MODEL_LINK);
    const loadsOf = (folder) => server.extensionLogLines(`model loaded from ${folder} in `).length;
    await wb.setSettings([['parafill.model', MODEL_LINK]], settingsFile);
    await waitFor(() => loadsOf(linked) === 1, 120_000, `the model in ${linked} to load`, 250).catch((err) => {
      throw new Error(`${err.message}\n${server.extensionLog()}`);
    });
    await wb.press(`${CTRL}+W`);
    const firstModelLoads = loadsOf(testModelFolder());
    const [pid] = server.languageServerPids();
    assert.ok(pid, 'no parafill serve process found');
    process.kill(pid, 'SIGKILL');
    await waitFor(
      async () => {
        const pids = server.languageServerPids();
        return pids.length === 1 && pids[0] !== pid && (await wb.statusIcon()) === 'codicon-sparkle';
      },
      120_000,
      'a new server with its model loaded',
      250,
    );
    await waitFor(() => loadsOf(linked) === 2, 120_000, 'the restarted server to load the current model', 250).catch((err) => {
      throw new Error(`${err.message}\n${server.extensionLog()}`);
    });
    assert.equal(loadsOf(testModelFolder()), firstModelLoads, 'the restarted server loaded the model of its first start');
    await wb.openFile(AFTER_RESTART, 'class Stack');
    await wb.press(`${CTRL}+End`);
    let r;
    for (const text of ['def multiply', ...TRIALS]) {
      r = await wb.typeAndTime(text, 15_000);
      if (r) {
        break;
      }
      await wb.press('Escape', 'End', 'Enter');
    }
    assert.ok(r, `no ghost text after the restart\n${server.extensionLog()}`);
    await wb.press('Escape', `${CTRL}+S`, `${CTRL}+W`);
  });

  test('a missing server command gives an error with the fix; fixing the setting recovers', async () => {
    // Through the Settings editor, as a user would.
    await wb.setSettings([['parafill.server.path', '/nonexistent/bin/parafill']], settingsFile);

    // As a toast, or in the notification center when that is open.
    const toast = wb.notification('was not found').first();
    await toast.waitFor({ timeout: 30_000 });
    const message = (await toast.textContent()) ?? '';
    assert.match(message, /scripts\/setup\.sh/);
    assert.match(message, /parafill\.server\.path/);
    // Awaited, not read once: one CI run (2026-12-06, training beside it) still read the loading icon just
    // after the toast appeared (cause not established).
    await waitFor(async () => (await wb.statusIcon()) === 'codicon-error', 30_000, 'the error icon');
    assert.equal(server.readSettings()?.['parafill.server.path'], '/nonexistent/bin/parafill');

    await wb.setSettings([['parafill.server.path', serverExecutable()]], settingsFile);
    await waitFor(async () => (await wb.statusIcon()) === 'codicon-sparkle', 120_000, 'the server back after the fix');
    await wb.press(`${CTRL}+W`);
  });

  test('the page contacted no host but 127.0.0.1', () => {
    assert.ok(hosts.size > 0);
    assert.deepEqual([...hosts], ['127.0.0.1'], `hosts contacted: ${[...hosts].join(', ')}`);
  });
});
