#!/usr/bin/env bash
# VS Code client: install what its tests need, build + lint + package the extension, then run the node tests
# (tests/vscode: unit tests of the path and server-command modules, a protocol test over stdio, and an end-to-end
# test in code-server + headless Chromium).
# Everything comes from the package registries (Debian, npm, PyPI). Installs are cached between runs:
# vscode-client/node_modules (until package-lock.json changes) and code-server in vscode-client/.cache.
# Usage: bash scripts/test_vscode.sh [node --test options, e.g. --test-name-pattern=protocol]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CLIENT=$ROOT/vscode-client
CACHE=${PARAFILL_VSCODE_CACHE:-$CLIENT/.cache}
CODE_SERVER_VERSION=4.100.3
RIPGREP_CACHE=vscode-ripgrep-cache-1.15.11  # what @vscode/ripgrep 1.15.11 (in code-server 4.100.3) looks for
step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }

step "system packages"
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v rg >/dev/null || missing+=(ripgrep)
command -v pkg-config >/dev/null || missing+=(pkg-config)
[ -e /usr/include/gssapi/gssapi.h ] || missing+=(libkrb5-dev)  # code-server's kerberos module builds against it
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" >/dev/null
fi
command -v node >/dev/null || { echo "node (20 or newer) is required" >&2; exit 1; }

step "python server (.venv)"
bash scripts/setup.sh

step "npm ci (vscode-client)"
lock_sum=$(sha256sum "$CLIENT/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$CLIENT/node_modules/.parafill-lock-sha256" 2>/dev/null)" != "$lock_sum" ]; then
  (cd "$CLIENT" && npm ci --no-audit --no-fund)
  echo "$lock_sum" >"$CLIENT/node_modules/.parafill-lock-sha256"
else
  echo "node_modules up to date"
fi

step "code-server $CODE_SERVER_VERSION"
CS_DIR=$CACHE/code-server
if [ ! -f "$CS_DIR/.installed-$CODE_SERVER_VERSION" ]; then
  rm -rf "$CS_DIR"
  mkdir -p "$CS_DIR"
  echo '{"private": true}' >"$CS_DIR/package.json"
  # @vscode/ripgrep's postinstall downloads rg from GitHub unless its cache holds it: seed it with Debian's rg.
  tmp=$(mktemp -d)
  mkdir -p "$tmp/$RIPGREP_CACHE"
  tar czf "$tmp/$RIPGREP_CACHE/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz" -C "$(dirname "$(command -v rg)")" rg
  # argon2 finds no prebuilt binary offline and builds from source; node-pty's `npx node-gyp` needs npm_config_yes.
  (cd "$CS_DIR" && TMPDIR=$tmp npm_config_yes=true npm_config_unsafe_perm=true \
    npm install --no-audit --no-fund --no-save "code-server@$CODE_SERVER_VERSION")
  HOME=$tmp XDG_CONFIG_HOME=$tmp "$CS_DIR/node_modules/.bin/code-server" --version
  rm -rf "$tmp"
  touch "$CS_DIR/.installed-$CODE_SERVER_VERSION"
else
  echo "cached in $CS_DIR"
fi
export CODE_SERVER=$CS_DIR/node_modules/.bin/code-server

step "build, lint, type-check, package"
(cd "$CLIENT" && npm run --silent build && npm run --silent lint && npm run --silent package >/dev/null)
ls -l "$CLIENT/parafill.vsix"

step "node tests (tests/vscode)"
export PARAFILL_SERVER=$ROOT/.venv/bin/parafill
(cd "$CLIENT" && node --test --test-concurrency=1 --test-reporter=spec "$@" \
  ../tests/vscode/client.test.mjs ../tests/vscode/protocol.test.mjs ../tests/vscode/e2e.test.mjs)
step "done"
