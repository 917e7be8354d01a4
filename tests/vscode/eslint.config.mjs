// ESLint for the VS Code client tests; the plugins come from vscode-client/node_modules (npm ci there).
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../vscode-client/package.json', import.meta.url));
const js = require('@eslint/js');
const globals = require('globals');

export default [
  js.configs.recommended,
  {
    files: ['**/*.mjs'],
    languageOptions: { ecmaVersion: 'latest', sourceType: 'module', globals: { ...globals.node } },
    rules: {
      'no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'smart'],
    },
  },
  {
    // Functions passed to page.evaluate run in the browser.
    files: ['workbench.mjs'],
    languageOptions: { globals: { ...globals.browser } },
  },
];
