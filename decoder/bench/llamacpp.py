"""llama.cpp (through llama-cpp-python) as the AR baseline on the same weights, converted to GGUF.

`LlamaCppSpanRunner` answers the span benchmark's requests like our runners: a cold prompt (the context is
reset), then exactly N greedy tokens with llama.cpp's own sampler chain (as its server runs it), the first
from the prefill. `parity` checks the conversion before any timing is trusted: tokenization of held-out
text, the last prompt position's logits, and greedy tokens against our AR decoder.

llama-cpp-python is optional (benchmarks/llamacpp/install.sh builds it, ~8 min on 2 cores): everything
here imports it lazily, and `available()` says whether it is there.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from decoder.bench.prompts import fim_prompts
from decoder.bench.spans import SpanSample
from decoder.engine import Engine
from decoder.evaluation.tasks import stdlib_heldout_files
from decoder.generation import GenerationParams
from decoder.router import generate


def available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def server_available() -> bool:
    """llama-cpp-python with its OpenAI-compatible server (the [server] extra: fastapi, uvicorn, ...)."""
    if not available():
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("fastapi", "uvicorn", "sse_starlette"))


@contextlib.contextmanager
def serve(
    path: str | Path, threads: int = 1, log: str | Path | None = None, n_ctx: int = 4096, alias: str | None = None
) -> Iterator[str]:
    """Run `python -m llama_cpp.server` on 127.0.0.1 (a free port) for the duration; yields its API base URL.
    `alias`: the model name requests use (default: the file path)."""
    import socket
    import subprocess
    import sys

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--host", "127.0.0.1"]
    # n_threads_batch too: its default (all cores) made prompt processing 10-100x slower on a busy 2-core machine
    cmd += ["--port", str(port), "--n_threads", str(threads), "--n_threads_batch", str(threads)]
    cmd += ["--n_ctx", str(n_ctx)] + (["--model_alias", alias] if alias else [])
    url = f"http://127.0.0.1:{port}/v1"
    with open(log or os.devnull, "w") as out:  # a file, never a pipe: a full pipe would block the server
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                        break
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = Path(log).read_text()[-2000:] if log else "(no log kept)"
                    raise RuntimeError(f"llama_cpp.server did not start (log: {log}):\n{tail}")
                time.sleep(0.3)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def version() -> str | None:
    if not available():
        return None
    import llama_cpp

    return getattr(llama_cpp, "__version__", "unknown")


@contextlib.contextmanager
def _quiet_stderr():
    """llama.cpp's C code logs to fd 2 even with verbose=False on some paths: silence it while loading."""
    saved = os.dup(2)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def load(path: str | Path, threads: int, n_ctx: int = 4096, logits_all: bool = False) -> Any:
    from llama_cpp import Llama

    with _quiet_stderr():
        return Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_batch=512,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=logits_all,
            verbose=False,
        )


class LlamaCppSpanRunner:
    def __init__(self, path: str | Path, threads: int, n_ctx: int = 4096) -> None:
        self.path = Path(path)
        self.llm = load(path, threads, n_ctx)
        kind = "f16" if "f16" in self.path.name else "f32" if "f32" in self.path.name else self.path.stem
        self.name = f"llama.cpp {kind}"

    def run(self, prompt_ids: list[int], span: int) -> SpanSample:
        llm = self.llm
        llm.reset()  # cold prompt: nothing of the last request is reused
        tokens: list[int] = []
        started = time.perf_counter()
        first = started
        for token in llm.generate(prompt_ids, temp=0.0, repeat_penalty=1.0, reset=True):
            tokens.append(int(token))
            if len(tokens) == 1:
                first = time.perf_counter()
            if len(tokens) == span:
                break
        ended = time.perf_counter()
        return SpanSample(
            runner=self.name,
            span=span,
            prompt="",
            prompt_tokens=len(prompt_ids),
            prefill_ms=(first - started) * 1000,
            decode_ms=(ended - first) * 1000,
            tokens=len(tokens),
            decode_passes=len(tokens) - 1,
            token_ids=tokens,
        )


def parity(engine: Engine, path: str | Path, prompts: int = 4, new_tokens: int = 32, seed: int = 0) -> dict[str, Any]:
    """Is the GGUF the same model? Tokenization of held-out text (our tokenizer vs llama.cpp's, special
    tokens parsed), last-position logits on FIM prompts, and greedy tokens vs our AR decoder (which never
    emits the mask / prompt-format tokens: llama.cpp gets the same ban through a logits processor)."""
    llm = load(path, threads=1, logits_all=True)
    tok = engine.tokenizer
    texts = [f.text[:4000] for f in stdlib_heldout_files()[:8]]
    texts.append("<|fim_suffix|>x = 1<|fim_prefix|>def f(a):\n    return a<|fim_middle|>")
    same_tok = [tok.encode(t) == llm.tokenize(t.encode("utf-8"), add_bos=False, special=True) for t in texts]
    bias = engine.logit_bias.cpu().numpy() if engine.logit_bias is not None else None

    def ban(_ids: Any, logits: np.ndarray) -> np.ndarray:
        return logits if bias is None else logits + bias[: logits.shape[0]]

    max_diff, argmax_same, greedy_same, first_diverge = 0.0, 0, 0, []
    items = fim_prompts(tok, prompts, seed)
    params = GenerationParams(max_new_tokens=new_tokens, temperature=0.0)
    for p in items:
        llm.reset()
        llm.eval(p.ids)
        theirs_logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        with torch.inference_mode():
            seq = engine.start(p.ids, reserve=1)
            ours_logits = engine.model.logits(seq.last_hidden).double().cpu().numpy()
        max_diff = max(max_diff, float(np.abs(ours_logits - theirs_logits).max()))
        argmax_same += int(ours_logits.argmax() == theirs_logits.argmax())
        ours = generate(engine, p.ids, "ar", params).token_ids
        theirs: list[int] = []
        for token in llm.generate(p.ids, temp=0.0, repeat_penalty=1.0, reset=True, logits_processor=[ban]):
            theirs.append(int(token))
            if len(theirs) == len(ours):
                break
        greedy_same += int(ours == theirs)
        first_diverge.append(next((i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b), None))
    engine.clear_prefix_cache()
    return {
        "gguf": str(path),
        "tokenization_identical": f"{sum(same_tok)}/{len(same_tok)}",
        "prompt_logits_max_abs_diff": round(max_diff, 5),
        "prompt_argmax_agreement": f"{argmax_same}/{len(items)}",
        "greedy_identical": f"{greedy_same}/{len(items)}",
        "greedy_tokens": new_tokens,
        "first_divergence": first_diverge,
    }


def format_parity(p: dict[str, Any]) -> str:
    return (
        f"tokenization {p['tokenization_identical']}, prompt logits max |diff| {p['prompt_logits_max_abs_diff']}, "
        f"argmax {p['prompt_argmax_agreement']}, greedy {p['greedy_tokens']} tokens identical {p['greedy_identical']}"
    )
