"""`parafill serve` with one injected fault: the Nth counted forward pass raises, as out of memory would.

Nothing that runs here fails that way on demand, yet the server must live through it, so the tests start
this launcher instead of `parafill serve`: the real server over a real pipe, with only the failing pass
planted. `python -m tests.lsp.faulty_server N`: pass N fails (once; every other pass runs normally).
"""

from __future__ import annotations

import sys

from decoder.engine import Engine
from lsp_server.cli import main

FAIL_AT_PASS = int(sys.argv[1]) if __name__ == "__main__" else 0
FAULT_MESSAGE = "injected fault: out of memory"
_real_pass = Engine._pass
_passes = 0


def _pass_failing_once(self: Engine, *args, **kwargs):
    global _passes
    _passes += 1
    if _passes == FAIL_AT_PASS:
        raise RuntimeError(FAULT_MESSAGE)
    return _real_pass(self, *args, **kwargs)


Engine._pass = _pass_failing_once

if __name__ == "__main__":
    sys.exit(main(["serve"]))
