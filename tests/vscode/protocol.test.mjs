// Protocol-level test: the client library VS Code uses (vscode-languageserver-protocol + vscode-jsonrpc)
// drives the real `parafill serve` over stdio: initialize, didOpen, inline completion, settings, explain with
// streamed progress (request and command), cancellation, shutdown/exit.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import * as path from 'node:path';
import {
  ROOT,
  randomModelFolder,
  removeRandomModels,
  requireClientDep,
  serverExecutable,
  testModelFolder,
  waitFor,
} from './helpers.mjs';

const P = requireClientDep('vscode-languageserver-protocol/node');

const SOURCE = `def add(a, b):
    """Return the sum of a and b."""
    return a + b


class Stack:
    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        return self.
`;
const URI = pathToFileURL(path.join(ROOT, 'example_stack.py')).href;
const CURSOR = { line: 13, character: '        return self.'.length };
const FUNCTION_RANGE = { start: { line: 0, character: 0 }, end: { line: 2, character: 16 } };

/** An inline completion item's text: a plain string, or a snippet's value. */
const insertTextOf = (item) => (typeof item.insertText === 'string' ? item.insertText : item.insertText.value);

describe('parafill serve over stdio (vscode-languageserver-protocol)', () => {
  let proc;
  let conn;
  let stderr = '';
  let exitCode;
  let initResult;
  const logMessages = [];

  /** The items of an inline completion request at `position` in the test document (a list or a list object). */
  const inlineItems = async (position, triggerKind) => {
    const result = await conn.sendRequest(P.InlineCompletionRequest.type, {
      textDocument: { uri: URI },
      position,
      context: { triggerKind },
    });
    return Array.isArray(result) ? result : (result?.items ?? []);
  };

  before(async () => {
    proc = spawn(serverExecutable(), ['serve'], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    proc.stderr.on('data', (d) => {
      stderr += d.toString();
    });
    proc.on('exit', (code) => {
      exitCode = code;
    });
    conn = P.createProtocolConnection(new P.StreamMessageReader(proc.stdout), new P.StreamMessageWriter(proc.stdin));
    conn.onNotification(P.LogMessageNotification.type, (m) => logMessages.push(m.message));
    conn.onNotification(P.ShowMessageNotification.type, (m) => logMessages.push(m.message));
    conn.onRequest(P.WorkDoneProgressCreateRequest.type, () => null);
    conn.listen();
  });

  after(() => {
    removeRandomModels();
    conn?.dispose();
    if (proc && proc.exitCode === null) {
      proc.kill('SIGKILL');
    }
  });

  test('initialize advertises inline completion and the explain command', async () => {
    initResult = await conn.sendRequest(P.InitializeRequest.type, {
      processId: process.pid,
      rootUri: pathToFileURL(ROOT).href,
      workspaceFolders: null,
      capabilities: {
        general: { positionEncodings: ['utf-16'] },
        window: { workDoneProgress: true },
        textDocument: {
          synchronization: { dynamicRegistration: false },
          inlineCompletion: { dynamicRegistration: false },
        },
        workspace: { configuration: false },
      },
      initializationOptions: { parafill: { model: testModelFolder(), timeBudgetMs: 5000, explainMaxTokens: 64 } },
    });
    await conn.sendNotification(P.InitializedNotification.type, {});
    const caps = initResult.capabilities;
    assert.ok(caps.inlineCompletionProvider, `no inlineCompletionProvider in ${JSON.stringify(caps)}`);
    assert.ok(caps.executeCommandProvider?.commands.includes('parafill.explain'), 'parafill.explain not advertised');
    assert.ok(caps.textDocumentSync, 'no textDocumentSync');
  });

  test('didOpen then inline completion: text from the model, range on the cursor line', async () => {
    await conn.sendNotification(P.DidOpenTextDocumentNotification.type, {
      textDocument: { uri: URI, languageId: 'python', version: 1, text: SOURCE },
    });
    // The model loads in the background: an empty answer while loading is allowed, so ask until it answers.
    const items = await waitFor(
      async () => {
        const answered = await inlineItems(CURSOR, P.InlineCompletionTriggerKind.Invoked);
        return answered.some((i) => insertTextOf(i).trim()) ? answered : null;
      },
      120_000,
      'an inline completion with text',
      250,
    ).catch((error) => assert.fail(`${error.message}; server stderr:\n${stderr.slice(-3000)}`));
    const item = items[0];
    assert.ok(insertTextOf(item).length > 0);
    assert.ok(item.range, 'the item must carry its range');
    assert.equal(item.range.start.line, CURSOR.line, 'range must start on the cursor line');
    assert.equal(item.range.end.line, CURSOR.line, 'range must end on the cursor line');
    assert.ok(item.range.end.character >= CURSOR.character);
  });

  test('didChange + didChangeConfiguration enable=false: no completions; enable=true: back', async () => {
    await conn.sendNotification(P.DidChangeTextDocumentNotification.type, {
      textDocument: { uri: URI, version: 2 },
      contentChanges: [{ range: { start: CURSOR, end: CURSOR }, text: 'i' }],
    });
    const at = { line: CURSOR.line, character: CURSOR.character + 1 };
    const ask = () => inlineItems(at, P.InlineCompletionTriggerKind.Automatic);
    const lastInline = async () => (await conn.sendRequest('parafill/stats', {})).last.inline;
    await conn.sendNotification(P.DidChangeConfigurationNotification.type, { settings: { parafill: { enable: false } } });
    assert.deepEqual(await ask(), [], 'completions while disabled');
    assert.equal((await lastInline()).stop_reason, 'disabled');
    await conn.sendNotification(P.DidChangeConfigurationNotification.type, { settings: { parafill: { enable: true } } });
    await ask();
    const back = await lastInline();
    assert.notEqual(back.stop_reason, 'disabled', 'still disabled after enable=true');
    assert.notEqual(back.route, 'none', `no decoder answered (${back.stop_reason})`);
  });

  test('parafill/explain streams $/progress reports on the client token and returns the whole text', async () => {
    const token = 'explain-token-1';
    const reports = [];
    let begun = false;
    let ended = false;
    const sub = conn.onProgress(P.WorkDoneProgress.type, token, (v) => {
      if (v.kind === 'begin') {
        begun = true;
      } else if (v.kind === 'report' && v.message) {
        reports.push(v.message);
      } else if (v.kind === 'end') {
        ended = true;
      }
    });
    const result = await conn.sendRequest('parafill/explain', {
      textDocument: { uri: URI },
      range: FUNCTION_RANGE,
      workDoneToken: token,
    });
    sub.dispose();
    const text = typeof result === 'string' ? result : result.text;
    assert.equal(typeof text, 'string');
    assert.ok(text.length > 0, 'empty explanation');
    assert.ok(begun && ended, 'progress did not begin and end');
    assert.ok(reports.length >= 1, 'no progress reports');
    assert.equal(reports.join(''), text, 'streamed pieces do not add up to the final text');
  });

  test('workspace/executeCommand parafill.explain (uri, range) answers the same way', async () => {
    const reports = [];
    const token = 'explain-token-2';
    const sub = conn.onProgress(P.WorkDoneProgress.type, token, (v) => {
      if (v.kind === 'report' && v.message) {
        reports.push(v.message);
      }
    });
    const result = await conn.sendRequest(P.ExecuteCommandRequest.type, {
      command: 'parafill.explain',
      arguments: [URI, FUNCTION_RANGE],
      workDoneToken: token,
    });
    sub.dispose();
    const text = typeof result === 'string' ? result : result?.text;
    assert.ok(typeof text === 'string' && text.length > 0, `unexpected result ${JSON.stringify(result)}`);
    assert.equal(reports.join(''), text);
  });

  test('cancelling an explain after its first report answers RequestCancelled (-32800); the decoder stops', async (t) => {
    // The shipped model explains 14 lines in a few tokens, over before a cancel could land: switch to a random
    // model that never ends an answer by itself (3000 tokens: about 24 s), then back.
    const rambling = randomModelFolder('rambling');
    const configure = (settings) =>
      conn.sendNotification(P.DidChangeConfigurationNotification.type, { settings: { parafill: settings } });
    const stats = () => conn.sendRequest('parafill/stats', {});
    await configure({ model: rambling, explainMaxTokens: 3000 });
    t.after(() => configure({ model: testModelFolder(), explainMaxTokens: 256 }));
    await waitFor(async () => {
      const { model } = await stats();
      return model.state === 'ready' && model.folder === rambling;
    }, 60_000, 'the random model to load');

    const token = 'explain-token-3';
    const source = new P.CancellationTokenSource();
    let first;
    const firstReport = new Promise((resolve) => {
      first = resolve;
    });
    const sub = conn.onProgress(P.WorkDoneProgress.type, token, (v) => {
      if (v.kind === 'report') {
        first();
      }
    });
    const started = Date.now();
    const pending = conn.sendRequest(
      'parafill/explain',
      { textDocument: { uri: URI }, range: { start: { line: 0, character: 0 }, end: { line: 13, character: 0 } }, workDoneToken: token },
      source.token,
    );
    await firstReport;
    source.cancel();
    await assert.rejects(pending, (err) => err.code === P.LSPErrorCodes.RequestCancelled);
    sub.dispose();
    // The worker thread saw the cancel at its next forward pass: the decoder ended early, "cancelled".
    await waitFor(async () => (await stats()).last.explain?.stop_reason === 'cancelled', 10_000, 'the decoder to stop');
    const { last } = await stats();
    assert.ok(last.explain.tokens < 3000, `the explanation ran to its limit (${last.explain.tokens} tokens)`);
    t.diagnostic(`cancelled after ${last.explain.tokens} tokens, ${Date.now() - started} ms after the request`);
  });

  test('shutdown and exit: the process ends with status 0', async () => {
    await conn.sendRequest(P.ShutdownRequest.type);
    await conn.sendNotification(P.ExitNotification.type);
    await waitFor(() => exitCode !== undefined, 10_000, 'the server to exit').catch((error) =>
      assert.fail(`${error.message}; stderr:\n${stderr.slice(-2000)}`),
    );
    assert.equal(exitCode, 0, `server exit status ${exitCode}; stderr:\n${stderr.slice(-2000)}`);
    assert.ok(!/Traceback/.test(stderr), `traceback on stderr:\n${stderr.slice(-3000)}`);
  });
});
