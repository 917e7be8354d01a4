// Shared by the VS Code client tests: paths, the server command, the model the tests run, small utilities.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLIENT_DIR = path.join(ROOT, 'vscode-client');
export const ARTIFACTS = path.join(CLIENT_DIR, 'test-artifacts');
export const CACHE = process.env.PARAFILL_VSCODE_CACHE || path.join(CLIENT_DIR, '.cache');

/** `require` that resolves from vscode-client/node_modules (the tests' npm dependencies live there). */
export const requireClientDep = createRequire(path.join(CLIENT_DIR, 'package.json'));

/** The server executable: $PARAFILL_SERVER, else the repository's .venv/bin/parafill. */
export function serverExecutable() {
  const exe = process.env.PARAFILL_SERVER || path.join(ROOT, '.venv', 'bin', 'parafill');
  if (!fs.existsSync(exe)) {
    throw new Error(`parafill server not found at ${exe}: run \`bash scripts/setup.sh\` or set PARAFILL_SERVER`);
  }
  return exe;
}

/** The interpreter of the server's environment: $PARAFILL_PYTHON, else the repository's .venv/bin/python. */
export function pythonExecutable() {
  return process.env.PARAFILL_PYTHON || path.join(ROOT, '.venv', 'bin', 'python');
}

const randomModels = new Map();

// The random test checkpoints (tests/tiny_models.py): "tiny" answers in milliseconds (protocol tests);
// "small" (~10M parameters, like the shipped model) is slow enough on CPU to watch an explanation stream;
// "rambling" is "small" that never ends an answer by itself (no end-of-text, no quotes), so an explanation
// runs to its token limit (3000 tokens: about 24 s here) unless cancelled.
const SMALL = {
  hidden_size: 384,
  intermediate_size: 1024,
  num_hidden_layers: 6,
  num_attention_heads: 6,
  num_key_value_heads: 2,
  max_position_embeddings: 4096,
};
const RANDOM_MODEL_OVERRIDES = { tiny: {}, small: SMALL, rambling: { ...SMALL, endless: true } };

/** A random Qwen2 checkpoint written by tests/tiny_models.py into a temp folder, once per process and size. */
export function randomModelFolder(size = 'tiny') {
  if (!randomModels.has(size)) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), `parafill-${size}-`));
    const script =
      'import json, sys, pathlib; from tests.tiny_models import write_tiny_qwen2; ' +
      'write_tiny_qwen2(pathlib.Path(sys.argv[1]), **json.loads(sys.argv[2]))';
    execFileSync(pythonExecutable(), ['-c', script, dir, JSON.stringify(RANDOM_MODEL_OVERRIDES[size])], {
      cwd: ROOT,
      env: { ...process.env, PYTHONPATH: ROOT },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    randomModels.set(size, dir);
  }
  return randomModels.get(size);
}

/** Delete the random checkpoints this process wrote. */
export function removeRandomModels() {
  for (const dir of randomModels.values()) {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  randomModels.clear();
}

/**
 * The model folder a test runs. $PARAFILL_TEST_MODEL: "tiny" or "small" (random checkpoints), "default" (the
 * shipped model), or a folder. Unset: the shipped default model when it exists, else a random one of `fallback`.
 */
export function testModelFolder(fallback = 'small') {
  const choice = process.env.PARAFILL_TEST_MODEL;
  const shipped = path.join(ROOT, 'models', 'default');
  if (choice && choice in RANDOM_MODEL_OVERRIDES) {
    return randomModelFolder(choice);
  }
  if (choice === 'default' || (!choice && fs.existsSync(path.join(shipped, 'config.json')))) {
    return shipped;
  }
  return choice || randomModelFolder(fallback);
}

export function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Poll `fn` until it returns a truthy value or `timeoutMs` passes (then throws with `what`). */
export async function waitFor(fn, timeoutMs, what, intervalMs = 50) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await sleep(intervalMs);
  }
}

/**
 * Call `attempt(n)` for n = 1, 2, ... until it returns a truthy value (returned), at most `tries` times. A falsy
 * value is a try that did not land; an error thrown by `attempt` ends the retries at once (it is not one to retry).
 * Each retry and a success after one are logged under `what`, so a flaky step shows in the test output. Options:
 * `describe()` adds the state seen after a failed try to the log line and to the final error; `beforeRetry(n)`
 * runs before try n + 1 (it may throw to stop early, e.g. when what was to be clicked is gone).
 */
export async function retryUntil(what, tries, attempt, { describe, beforeRetry } = {}) {
  for (let n = 1; ; n++) {
    const value = await attempt(n);
    if (value) {
      if (n > 1) {
        console.log(`${what}: done at try ${n}`);
      }
      return value;
    }
    const state = describe ? `: ${await describe()}` : '';
    if (n === tries) {
      throw new Error(`${what}: not done in ${tries} tries${state}`);
    }
    console.log(`${what}: try ${n} did not land${state}; trying again`);
    await beforeRetry?.(n);
  }
}

/** `promise` as true when it resolves and false when it rejects: a timed-out wait as a try that did not land. */
export function resolves(promise) {
  return promise.then(
    () => true,
    () => false,
  );
}
