"""`parafill serve` without the `parafill/stats` request, as another LSP server or an older parafill would be.

The VS Code extension polls that request for the status bar's model state; against a server that lacks it the
item must stop showing "checking" (tests/vscode/e2e.test.mjs). The real server over a real pipe, with only that
one handler taken out: `python -m tests.lsp.statsless_server serve [options]`.
"""

from __future__ import annotations

import sys

from lsp_server import server as server_module
from lsp_server.cli import main

_create_server = server_module.create_server


def _create_server_without_stats(*args, **kwargs):
    server = _create_server(*args, **kwargs)
    del server.protocol.fm.features[server_module.STATS_REQUEST]  # answered "method not found" from now on
    return server


server_module.create_server = _create_server_without_stats

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
