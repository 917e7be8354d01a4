// The extension's modules that do not need VS Code (src/paths.ts, src/serverCommand.ts, src/statusView.ts),
// bundled with esbuild and run on the real file system: path settings as users write them, the server command,
// start-failure text, what the status bar item shows.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { CLIENT_DIR, requireClientDep } from './helpers.mjs';

const esbuild = requireClientDep('esbuild');

let tmp;
let paths;
let serverCommand;
let statusView;

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'parafill-client-units-'));
  const load = async (name) => {
    const outfile = path.join(tmp, `${name}.mjs`);
    await esbuild.build({
      entryPoints: [path.join(CLIENT_DIR, 'src', `${name}.ts`)],
      bundle: true,
      platform: 'node',
      format: 'esm',
      outfile,
      logLevel: 'warning',
    });
    return import(pathToFileURL(outfile).href);
  };
  paths = await load('paths');
  serverCommand = await load('serverCommand');
  statusView = await load('statusView');
});

after(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('path settings (src/paths.ts)', () => {
  const ws = path.join(os.tmpdir(), 'some-workspace');
  const home = path.join(os.tmpdir(), 'some-home');

  test('paths vs bare command names: any separator counts, Windows drive paths included', () => {
    assert.equal(paths.isPathLike('python3'), false);
    assert.equal(paths.isPathLike('parafill'), false);
    assert.equal(paths.isPathLike('/usr/bin/python3'), true);
    assert.equal(paths.isPathLike('.venv/bin/python'), true);
    assert.equal(paths.isPathLike('C:/tools/python.exe'), true);
    assert.equal(paths.isPathLike('.venv\\Scripts\\python.exe'), true);
  });

  test('~, ${workspaceFolder} and relative paths are resolved; absolute paths are kept', () => {
    assert.equal(paths.expandPath('models/x', ws, home), path.join(ws, 'models', 'x'));
    assert.equal(paths.expandPath('${workspaceFolder}/models/x', ws, home), path.join(ws, 'models', 'x'));
    assert.equal(paths.expandPath('~/models/x', ws, home), path.join(home, 'models', 'x'));
    assert.equal(paths.expandPath('~', ws, home), home);
    assert.equal(paths.expandPath('/abs/models/x', ws, home), '/abs/models/x');
    assert.equal(paths.expandPath('  ', ws, home), '');
    assert.equal(paths.expandPath('models/x', undefined, home), 'models/x', 'no workspace folder: left relative');
  });

  test('command settings: bare names stay for the PATH lookup, paths are resolved', () => {
    assert.equal(paths.expandCommandPath('python3', ws, home), 'python3');
    assert.equal(paths.expandCommandPath('.venv/bin/python', ws, home), path.join(ws, '.venv', 'bin', 'python'));
    assert.equal(paths.expandCommandPath('~/bin/parafill', ws, home), path.join(home, 'bin', 'parafill'));
    assert.equal(paths.expandCommandPath('${workspaceFolder}/parafill', ws, home), path.join(ws, 'parafill'));
  });
});

describe('server command (src/serverCommand.ts)', () => {
  test('a relative server.path resolves against the workspace folder, not the current directory', () => {
    const ws = fs.mkdtempSync(path.join(tmp, 'ws-'));
    fs.mkdirSync(path.join(ws, 'bin'));
    const exe = path.join(ws, 'bin', 'parafill');
    fs.writeFileSync(exe, '#!/bin/sh\n', { mode: 0o755 });
    const settings = { pythonPath: '', path: paths.expandCommandPath('bin/parafill', ws), args: ['--log-level', 'DEBUG'] };
    const cmd = serverCommand.resolveServerCommand(settings, [ws]);
    assert.equal(cmd.command, exe);
    assert.deepEqual(cmd.args, ['serve', '--log-level', 'DEBUG']);
    assert.equal(cmd.source, 'parafill.server.path');
  });

  test('a Windows-style path is checked as a path (not looked up on PATH), and a missing one says which setting', () => {
    const settings = { pythonPath: 'C:/nowhere/python.exe', path: '', args: [] };
    assert.throws(
      () => serverCommand.resolveServerCommand(settings, []),
      (err) => err instanceof serverCommand.ServerNotFoundError && err.message.includes('"C:/nowhere/python.exe"'),
    );
  });
});

describe('start-failure text (src/serverCommand.ts)', () => {
  const command = { command: '/x/parafill', args: ['serve'], source: 'PATH' };
  // Lines as lsp_server/logs.py writes them, then an uncaught traceback.
  const tail = [
    'parafill INFO parafill.model: loading model from /m (float32 on cpu)',
    'parafill INFO parafill.model: model config read',
    'Traceback (most recent call last):',
    '  File "/x/lsp_server/server.py", line 1, in <module>',
    'OSError: [Errno 24] Too many open files',
  ];

  test('INFO lines that mention "model" are not taken for the cause', () => {
    // Killed without a word (the OOM killer, a signal): the last lines are ordinary INFO records.
    const killed = serverCommand.explainStartFailure(command, tail.slice(0, 2));
    assert.doesNotMatch(killed, /Check "parafill\.model"|loading model/);
    assert.match(killed, /failed to start \(\/x\/parafill serve\): it exited\./);
    const text = serverCommand.explainStartFailure(command, [...tail, 'parafill INFO parafill.model: model unloaded']);
    assert.match(text, /OSError: \[Errno 24\] Too many open files/);
    assert.doesNotMatch(text, /Check "parafill\.model"/);
  });

  test('an ERROR record about the model gives the model fix', () => {
    const text = serverCommand.explainStartFailure(command, [
      ...tail.slice(0, 2),
      'parafill ERROR parafill.engine_holder: cannot load model from /m: no config.json',
    ]);
    assert.match(text, /Check "parafill\.model"/);
  });

  test('a server that kept crashing is said to have crashed, not to have failed to start', () => {
    const text = serverCommand.explainStartFailure(command, tail, undefined, true);
    assert.match(text, /crashed repeatedly/);
    assert.doesNotMatch(text, /failed to start/);
  });

  test('only error records and non-record lines are problem lines', () => {
    assert.deepEqual(serverCommand.problemLines(['parafill WARNING a: w', 'parafill CRITICAL a: c', 'plain', '', 'parafill DEBUG a: d']), [
      'parafill CRITICAL a: c',
      'plain',
    ]);
  });
});

describe('status bar item (src/statusView.ts)', () => {
  const base = {
    state: 'running',
    detail: '',
    enabled: true,
    model: 'default',
    device: 'cpu',
    modelState: 'ready',
    modelError: undefined,
    lastLatencyMs: undefined,
  };
  const view = (changes) => statusView.statusView({ ...base, ...changes });
  const icon = (v) => v.text.match(/^\$\(([^)]+)\)/)?.[1];

  test('a running server whose model is not reported yet is not shown ready', () => {
    const checking = view({ modelState: 'checking' });
    assert.equal(icon(checking), 'loading~spin');
    assert.equal(checking.command, 'parafill.showLog');
    assert.match(checking.tooltip, /Checking the model/);
    assert.equal(icon(view({ modelState: 'loading' })), 'loading~spin');
    const ready = view({ lastLatencyMs: 41.6 });
    assert.equal(icon(ready), 'sparkle');
    assert.equal(ready.text, '$(sparkle) parafill default · 42 ms');
    assert.equal(ready.command, 'parafill.toggle');
    assert.equal(ready.ariaLabel, 'parafill on, server running, model ready');
    // A server that does not report its model (undefined) can only be taken at its word.
    assert.equal(icon(view({ modelState: undefined })), 'sparkle');
  });

  test('"off" shows at once whatever the server and model are doing; a click turns it on again', () => {
    for (const changes of [{}, { modelState: 'checking' }, { modelState: 'loading' }, { state: 'starting', modelState: undefined }, { modelState: 'failed' }]) {
      const off = view({ ...changes, enabled: false });
      assert.equal(icon(off), 'circle-slash', JSON.stringify(changes));
      assert.equal(off.command, 'parafill.toggle', JSON.stringify(changes));
      assert.match(off.ariaLabel, /^parafill off,/);
    }
    assert.match(view({ enabled: false, modelState: 'loading' }).tooltip, /\(loading\)/, 'the tooltip still tells the model state');
  });

  test('a server that cannot run outranks everything; a failed model gives the setting to fix', () => {
    const failed = view({ state: 'failed', detail: 'server not found', modelState: undefined, enabled: false });
    assert.equal(icon(failed), 'error');
    assert.equal(failed.background, 'error');
    assert.equal(failed.command, 'parafill.showLog');
    assert.match(failed.tooltip, /Server: failed \(server not found\)/);
    const noModel = view({ modelState: 'failed', modelError: 'no config.json in /m' });
    assert.equal(icon(noModel), 'warning');
    assert.equal(noModel.background, 'warning');
    assert.match(noModel.tooltip, /Error: no config\.json in \/m/);
    assert.match(noModel.tooltip, /fix "parafill\.model"/);
  });

  test('the model label is the folder the server loaded, trailing separators ignored', () => {
    assert.equal(statusView.modelLabelOf('/home/u/models/tiny/'), 'tiny');
    assert.equal(statusView.modelLabelOf('/home/u/models/tiny'), 'tiny');
    assert.equal(statusView.modelLabelOf('/'), '/');
  });
});
