// Driving the VS Code workbench in a Playwright page: keyboard, editor, ghost text, status bar, output panel.
import * as path from 'node:path';
import { ARTIFACTS, requireClientDep, resolves, retryUntil, waitFor } from './helpers.mjs';

const { chromium } = requireClientDep('playwright-core');

export const CTRL = process.platform === 'darwin' ? 'Meta' : 'Control';
const GHOST = '.monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text';

/**
 * Headless Debian Chromium with a fresh profile. Every http(s)/ws(s) host the pages contact is added to `hosts`.
 */
export async function launchBrowser(profileDir, hosts, executablePath = process.env.CHROMIUM_PATH || '/usr/bin/chromium') {
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const record = (url) => {
    const u = new URL(url);
    if (['http:', 'https:', 'ws:', 'wss:'].includes(u.protocol)) {
      hosts.add(u.hostname);
    }
  };
  context.on('request', (r) => record(r.url()));
  context.on('page', (p) => p.on('websocket', (ws) => record(ws.url())));
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('websocket', (ws) => record(ws.url()));
  return { context, page };
}

/**
 * Map text as Monaco shows it: control characters as control pictures (U+2400...), tabs as spaces (runs of
 * blanks collapsed), so a file's text can be compared with what the page rendered.
 */
export function asRendered(text) {
  return (
    text
      // eslint-disable-next-line no-control-regex
      .replace(/[\x00-\x08\x0b-\x1f]/g, (c) => String.fromCharCode(0x2400 + c.charCodeAt(0)))
      .replace(/\x7f/g, '\u2421')
      .replace(/[ \t]+/g, ' ')
  );
}

/** In the page: time of the last keydown and of the first ghost text rendered after it. */
function instrumentGhostTiming(ghostSelector) {
  if (window.__parafill) {
    return;
  }
  const state = { lastKey: 0, ghostAt: 0, ghostVisibleAtKey: false };
  window.__parafill = state;
  window.addEventListener(
    'keydown',
    () => {
      state.lastKey = performance.now();
      state.ghostVisibleAtKey = !!document.querySelector(ghostSelector);
    },
    true,
  );
  new MutationObserver(() => {
    if (state.ghostAt <= state.lastKey && document.querySelector(ghostSelector)) {
      state.ghostAt = performance.now();
    }
  }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
}

/** In the page: every version of the output panel's visible text, with the time it was rendered. */
function recordOutputPanel() {
  const seen = [];
  window.__parafillOutput = seen;
  new MutationObserver(() => {
    const lines = document.querySelector('.part.panel .monaco-editor .view-lines');
    const text = lines ? (lines.innerText ?? '').replace(/\u00a0/g, ' ') : '';
    if (text && text !== seen[seen.length - 1]?.text) {
      seen.push({ t: performance.now(), text });
    }
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
}

export class Workbench {
  constructor(page) {
    this.page = page;
    this.keyboard = page.keyboard;
  }

  async open(url) {
    await this.page.goto(url, { waitUntil: 'domcontentloaded' });
    await this.page.waitForSelector('.monaco-workbench', { timeout: 60_000 });
    await this.page.evaluate(instrumentGhostTiming, GHOST);
    await this.page.evaluate(recordOutputPanel);
  }

  async press(...keys) {
    for (const key of keys) {
      await this.keyboard.press(key);
    }
  }

  /** Quick Open (Ctrl+P) a file of the workspace and wait until `expectText` is shown. */
  async openFile(name, expectText) {
    const row = `.quick-input-list .monaco-list-row[aria-label*="${name}"]`;
    const search = async () => {
      await this.press(`${CTRL}+P`);
      await this.page.waitForSelector('.quick-input-widget input', { state: 'visible' });
      await this.keyboard.type(name);
      return resolves(this.page.waitForSelector(row, { timeout: 20_000 }));
    };
    // A file written moments ago can be missing from the picker's first search: close it and ask once more.
    await retryUntil(`Quick Open listing ${name}`, 2, search, { beforeRetry: () => this.press('Escape') });
    await this.press('Enter');
    await this.page.waitForSelector(`.monaco-editor .view-line >> text=${expectText}`, { timeout: 30_000 });
    await this.focusEditor();
  }

  async focusEditor() {
    await this.page.click('.part.editor .monaco-editor .view-lines');
  }

  /** Select `count` whole lines from the top of the editor. */
  async selectFirstLines(count) {
    await this.focusEditor();
    await this.press('Escape', `${CTRL}+Home`);
    for (let i = 0; i < count; i++) {
      await this.press('Shift+ArrowDown');
    }
  }

  /** Run a command from the Command Palette (F1) by its title. */
  async runCommand(title) {
    await this.press('F1');
    await this.page.waitForSelector('.quick-input-widget input', { state: 'visible' });
    await this.keyboard.type(title);
    await this.page.waitForSelector(`.quick-input-list .monaco-list-row[aria-label*="${title.split(': ').at(-1)}"]`, {
      timeout: 10_000,
    });
    await this.press('Enter');
  }

  statusItem() {
    return this.page.locator('.statusbar-item', { hasText: 'parafill' });
  }

  async statusText() {
    return this.page.evaluate(() =>
      [...document.querySelectorAll('.statusbar-item')].map((e) => e.textContent ?? '').find((t) => t.includes('parafill')),
    );
  }

  /**
   * The codicon of the parafill status bar item (src/statusView.ts): sparkle = server running, model reported
   * ready, completions on; circle-slash = off; loading~spin = server starting or model not ready yet.
   */
  async statusIcon() {
    return this.page.evaluate(() => {
      const item = [...document.querySelectorAll('.statusbar-item')].find((e) => (e.textContent ?? '').includes('parafill'));
      const icon = item?.querySelector('.codicon');
      return icon ? [...icon.classList].find((c) => c.startsWith('codicon-') && c !== 'codicon-modifier-spin') : undefined;
    });
  }

  /** The ghost text shown: `inline` after the cursor, `lines` below it. */
  async ghostText() {
    return this.page.evaluate(() => {
      const inline = [...document.querySelectorAll('.monaco-editor .ghost-text-decoration')].map((e) => e.textContent).join('');
      // Lines after the first are rendered below the cursor line: one element per line holding ghost-text spans.
      const holders = [];
      for (const span of document.querySelectorAll('.monaco-editor span.ghost-text')) {
        if (!holders.includes(span.parentElement)) {
          holders.push(span.parentElement);
        }
      }
      const nbsp = (t) => (t ?? '').replace(/\u00a0/g, ' ');
      return { inline: nbsp(inline), lines: holders.map((e) => nbsp(e.textContent)) };
    });
  }

  /**
   * Type `text` quickly, then wait for ghost text rendered after the last keystroke. Returns
   * {ms: keystroke -> ghost text, visibleAtKey: ghost text was already shown at that keystroke}, or undefined.
   */
  async typeAndTime(text, timeoutMs) {
    await this.page.evaluate(() => {
      window.__parafill.ghostAt = 0;
    });
    await this.keyboard.type(text);
    return waitFor(
      () =>
        this.page.evaluate(() => {
          const s = window.__parafill;
          return s.ghostAt > s.lastKey ? { ms: s.ghostAt - s.lastKey, visibleAtKey: s.ghostVisibleAtKey } : null;
        }),
      timeoutMs,
      `ghost text after typing ${JSON.stringify(text)}`,
      20,
    ).catch(() => undefined);
  }

  /** Versions of the output panel's text since the last call ({t, text}), oldest first. */
  async takeOutputVersions() {
    return this.page.evaluate(() => window.__parafillOutput.splice(0));
  }

  async outputSays(needle) {
    return this.page.evaluate((n) => window.__parafillOutput.some((v) => v.text.includes(n)), needle);
  }

  async outputVersionCount() {
    return this.page.evaluate(() => window.__parafillOutput.length);
  }

  /** Milliseconds since the output panel's text last changed. */
  async outputQuietMs() {
    return this.page.evaluate(() => performance.now() - (window.__parafillOutput.at(-1)?.t ?? 0));
  }

  /**
   * Set text or number settings through the Settings editor (Ctrl+,), as a user would: for each [id, value],
   * search for the id, fill that setting's input, leave it with Tab. With `readSettings` (the user settings.json
   * as an object), each value is checked there and filled again if it did not land. Leaves the editor open.
   */
  async setSettings(entries, readSettings) {
    await this.press('Escape', `${CTRL}+Comma`);
    await this.page.waitForSelector('.settings-editor', { timeout: 20_000 });
    for (const [id, value] of entries) {
      const inSettings = () => String(readSettings?.()?.[id]) === String(value);
      const fill = async () => {
        await this.searchSettings(id);
        const input = this.page.locator(`.settings-editor .settings-tree-container [data-key="${id}"] input`).first();
        await input.fill(String(value), { timeout: 20_000 }).catch(async (err) => {
          throw new Error(`${err.message}\n${await this.settingsEditorState()}`);
        }); // fill replaces the whole value, focus or not
        await this.press('Tab');
        return !readSettings || resolves(waitFor(inSettings, 5_000, `${id} in settings.json`, 100));
      };
      await retryUntil(`${id} = ${JSON.stringify(value)} reaching settings.json`, 3, fill, {
        describe: () => `settings.json holds ${JSON.stringify(readSettings())}`,
      });
    }
  }

  /** Type `query` into the Settings editor's search box, checking that the box shows it. */
  async searchSettings(query) {
    const box = this.page.locator('.settings-editor .settings-header .suggest-input-container');
    const shows = async () => (await box.innerText()).trim() === query;
    const type = async () => {
      await box.click();
      await this.press(`${CTRL}+A`);
      await this.keyboard.type(query);
      return resolves(waitFor(shows, 3_000, 'the search box to show the query', 100));
    };
    // After a value is left with Tab, focus sits on the setting's gear with its hover up, and a click on the
    // box can go to closing that hover instead: the next id is then typed into nothing. Measured locally: the
    // second setting of one call needed a second try in 7 of 7 runs (all passed); before this check, 2 of 6 failed.
    await retryUntil(`the Settings search box taking ${JSON.stringify(query)}`, 3, type).catch(async (err) => {
      throw new Error(`${err.message}\n${await this.settingsEditorState()}`);
    });
  }

  /** For an error message: the search box, the focused element, and a screenshot. */
  async settingsEditorState() {
    const shot = path.join(ARTIFACTS, 'settings-failure.png');
    await this.page.screenshot({ path: shot }).catch(() => undefined);
    const box = this.page.locator('.settings-editor .settings-header .suggest-input-container');
    const search = await box.innerText().catch(() => '?');
    const focused = await this.page.evaluate(() => document.activeElement?.outerHTML.slice(0, 300));
    return `search box: ${JSON.stringify(search)}\nfocus: ${focused}\nscreenshot: ${shot}`;
  }

  notification(text) {
    return this.page.locator('.notification-list-item', { hasText: text });
  }
}
