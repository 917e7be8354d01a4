// A real VS Code (code-server 4.100.3, installed by scripts/test_vscode.sh) on 127.0.0.1 with a fresh profile.
import { execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { CACHE, waitFor } from './helpers.mjs';

const execFileAsync = promisify(execFile);

export const CODE_SERVER_VERSION = '4.100.3';

/** The code-server launcher from the test cache ($CODE_SERVER overrides). */
export function codeServerBinary() {
  const bin = process.env.CODE_SERVER || path.join(CACHE, 'code-server', 'node_modules', '.bin', 'code-server');
  if (!fs.existsSync(bin)) {
    throw new Error(`code-server not found at ${bin}: run \`bash scripts/test_vscode.sh\` (it installs it) or set CODE_SERVER`);
  }
  return bin;
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** VS Code settings for a quiet, deterministic test profile, plus `extra`. */
export function profileSettings(extra = {}) {
  return {
    'security.workspace.trust.enabled': false,
    'files.hotExit': 'off',
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.enableExperiments': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'update.mode': 'none',
    'telemetry.telemetryLevel': 'off',
    'extensions.autoUpdate': false,
    'extensions.autoCheckUpdates': false,
    'extensions.ignoreRecommendations': true,
    'git.enabled': false,
    'git.autoRepositoryDetection': false,
    'npm.autoDetect': 'off',
    // Only ghost text: no suggest widget competing for Tab.
    'editor.inlineSuggest.enabled': true,
    'editor.quickSuggestions': { other: 'off', comments: 'off', strings: 'off' },
    'editor.suggestOnTriggerCharacters': false,
    'editor.wordBasedSuggestions': 'off',
    'editor.parameterHints.enabled': false,
    'editor.minimap.enabled': false,
    'editor.stickyScroll.enabled': false,
    'editor.fontSize': 15,
    'window.commandCenter': false,
    ...extra,
  };
}

export class CodeServer {
  constructor({ workspace, settings, log = () => {} }) {
    this.base = fs.mkdtempSync(path.join(os.tmpdir(), 'parafill-code-server-'));
    this.userDataDir = path.join(this.base, 'user-data');
    this.extensionsDir = path.join(this.base, 'extensions');
    this.configFile = path.join(this.base, 'config.yaml');
    this.workspace = workspace;
    this.log = log;
    this.output = '';
    this.settings = settings;
    fs.mkdirSync(path.join(this.userDataDir, 'User'), { recursive: true });
    fs.mkdirSync(this.extensionsDir, { recursive: true });
    this.writeSettings();
  }

  /** Write the user settings VS Code starts with. A running code-server does not notice a rewrite of this file:
   * tests change settings through the Settings editor (Workbench.setSettings). */
  writeSettings() {
    const file = path.join(this.userDataDir, 'User', 'settings.json');
    fs.writeFileSync(file, JSON.stringify(profileSettings(this.settings), null, 2));
  }

  /** The user settings.json; undefined while the workbench is halfway through writing it. */
  readSettings() {
    try {
      return JSON.parse(fs.readFileSync(path.join(this.userDataDir, 'User', 'settings.json'), 'utf8'));
    } catch {
      return undefined;
    }
  }

  /** Pids of `parafill serve` processes started under this code-server (Linux /proc). */
  languageServerPids() {
    const children = new Map();
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) {
        continue;
      }
      try {
        const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
      } catch {
        /* exited meanwhile */
      }
    }
    const found = [];
    const walk = (pid) => {
      for (const child of children.get(pid) ?? []) {
        let cmdline = '';
        try {
          cmdline = fs.readFileSync(`/proc/${child}/cmdline`, 'utf8').split('\0').join(' ');
        } catch {
          /* exited meanwhile */
        }
        if (/parafill/.test(cmdline) && /\bserve\b/.test(cmdline)) {
          found.push(child);
        }
        walk(child);
      }
    };
    walk(this.proc.pid);
    return found;
  }

  commonArgs() {
    return ['--config', this.configFile, '--user-data-dir', this.userDataDir, '--extensions-dir', this.extensionsDir];
  }

  env() {
    // HOME inside the temp dir keeps the user's ~/.config/code-server and ~/.local untouched.
    return { ...process.env, HOME: this.base, XDG_CONFIG_HOME: path.join(this.base, 'config') };
  }

  async installExtension(vsix) {
    const { stdout, stderr } = await execFileAsync(
      codeServerBinary(),
      [...this.commonArgs(), '--force', '--install-extension', vsix],
      { env: this.env(), timeout: 120_000 },
    );
    const out = stdout + stderr;
    if (!/successfully installed/i.test(out)) {
      throw new Error(`installing ${vsix} failed:\n${out}`);
    }
    return out;
  }

  async start() {
    this.port = await freePort();
    fs.writeFileSync(this.configFile, `bind-addr: 127.0.0.1:${this.port}\nauth: none\ncert: false\n`);
    this.proc = spawn(
      codeServerBinary(),
      [
        ...this.commonArgs(),
        '--bind-addr', `127.0.0.1:${this.port}`,
        '--auth', 'none',
        '--disable-telemetry',
        '--disable-update-check',
        '--disable-workspace-trust',
        '--disable-getting-started-override',
        this.workspace,
      ],
      { env: this.env(), stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    const collect = (d) => {
      this.output += d.toString();
    };
    this.proc.stdout.on('data', collect);
    this.proc.stderr.on('data', collect);
    this.url = `http://127.0.0.1:${this.port}/`;
    await waitFor(
      async () => {
        if (this.proc.exitCode !== null) {
          throw new Error(`code-server exited with ${this.proc.exitCode}:\n${this.output}`);
        }
        try {
          const res = await fetch(`${this.url}healthz`);
          return res.status === 200;
        } catch {
          return false;
        }
      },
      60_000,
      'code-server /healthz',
      200,
    );
    return this.url;
  }

  /** SIGTERM to code-server's process group (the extension host and the language server go with it). */
  async stop() {
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((resolve) => this.proc.once('exit', resolve));
      try {
        process.kill(-this.proc.pid, 'SIGTERM');
      } catch {
        this.proc.kill('SIGTERM');
      }
      const timer = setTimeout(() => {
        try {
          process.kill(-this.proc.pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }, 10_000);
      await exited;
      clearTimeout(timer);
    }
  }

  /** Log files code-server wrote whose name passes `keep`, in directory order. */
  logFiles(keep) {
    const found = [];
    const walk = (dir) => {
      for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : []) {
        const p = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          walk(p);
        } else if (keep(entry.name)) {
          found.push(p);
        }
      }
    };
    walk(path.join(this.userDataDir, 'logs'));
    return found;
  }

  /** The extension's own log ("parafill" output channel) as code-server wrote it, for failure messages. */
  extensionLog() {
    return this.logFiles((name) => /parafill/i.test(name))
      .map((p) => `--- ${p}\n${fs.readFileSync(p, 'utf8').slice(-4000)}`)
      .join('\n');
  }

  /** Lines of the extension's log (the server's stderr among them) that match `pattern` (a RegExp, or a string
   * the line contains), oldest first. */
  extensionLogLines(pattern) {
    const matches = typeof pattern === 'string' ? (l) => l.includes(pattern) : (l) => pattern.test(l);
    return this.logFiles((name) => name === 'parafill.log').flatMap((p) => fs.readFileSync(p, 'utf8').split('\n').filter(matches));
  }

  cleanup() {
    fs.rmSync(this.base, { recursive: true, force: true });
  }
}
