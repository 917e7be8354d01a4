"""The shared engine: one model, one radix prefix cache, and per-request KV buffers.

Both decoders talk to the model only through `Engine.start` (prefill a prompt, reusing the prefix cache)
and `Engine.step` (one forward pass: commit some tokens causally and/or look at a noisy block); the AR
decoder's speculative passes use `Engine.verify` and `Engine.truncate`.
Every model call holds `self.lock`, so requests from several threads interleave between forward passes.

Who runs the forward pass is a `ForwardRunner`: `TorchRunner` (the model itself, CPU or CUDA) or the ONNX
Runtime runner in `decoder.onnx_backend` (EngineOptions.backend = "onnx"). A runner owns the layout of the
per-sequence KV buffers; the prefix cache, the LM head and the decoders above it do not change.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
from torch import Tensor

from decoder.checkpoint import load_model
from decoder.masks import step_mask
from decoder.model import CausalLM, LayerKV
from decoder.prefix_cache import RadixPrefixCache
from decoder.tokenizer import TextTokenizer

BACKENDS = ("torch", "onnx")


class PrefillInterrupted(Exception):
    """The request was cancelled (or ran out of time) between prefill chunks."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class EngineOptions:
    device: str = "cpu"
    dtype: torch.dtype | None = None  # None: fp32 on CPU, bf16 on CUDA (the onnx backend: always fp32)
    backend: str = "torch"  # "torch" or "onnx" (ONNX Runtime: CUDA EP with onnxruntime-gpu, else CPU)
    use_prefix_cache: bool = True
    cache_bytes: int = 256 << 20
    page_size: int = 16
    prefill_chunk: int = 512
    # CPU threads for torch. Small models are bound by per-op overhead, where extra threads only add
    # synchronisation (and collapse when another process holds a core); None: 1 below 50M parameters.
    threads: int | None = None


class ForwardRunner(Protocol):
    """Runs the model's forward pass for the engine and owns the layout of the KV buffers it writes."""

    def new_kv(self, capacity: int) -> list[LayerKV]:
        """Empty per-layer buffers; `keys`/`values` read as [1, kv_heads, capacity, head_dim] (may be views)."""
        ...

    def forward(
        self, kv: list[LayerKV], input_ids: Tensor, positions: Tensor, mask: Tensor | None, past: int
    ) -> Tensor:
        """Hidden states [1, T, hidden] for `input_ids` [1, T] at `positions` [1, T]; writes their keys and
        values at [past, past + T). mask: bool [T, past + T] (every query sees all `past` tokens), or None
        for plain causal attention when nothing is cached."""
        ...


class TorchRunner:
    """The PyTorch model itself (CPU or CUDA): KV buffers are plain [1, kv_heads, capacity, head_dim]."""

    def __init__(self, model: CausalLM) -> None:
        self.model = model
        self.description = f"torch on {next(model.parameters()).device}"

    def new_kv(self, capacity: int) -> list[LayerKV]:
        cfg = self.model.config
        param = next(self.model.parameters())
        shape = (1, cfg.num_key_value_heads, capacity, cfg.head_dim)
        return [
            LayerKV(
                torch.empty(shape, dtype=param.dtype, device=param.device),
                torch.empty(shape, dtype=param.dtype, device=param.device),
            )
            for _ in range(cfg.num_hidden_layers)
        ]

    def forward(
        self, kv: list[LayerKV], input_ids: Tensor, positions: Tensor, mask: Tensor | None, past: int
    ) -> Tensor:
        return self.model(input_ids, positions, attn_mask=mask, kv=kv, kv_start=past)


def make_runner(
    model: CausalLM, options: EngineOptions, folder: str | Path | None = None, threads: int | None = None
) -> ForwardRunner:
    """The runner for `options.backend`. `folder` (the checkpoint) is where the ONNX export is cached."""
    if options.backend == "torch":
        return TorchRunner(model)
    if options.backend == "onnx":
        from decoder.onnx_backend import OnnxRunner  # imports onnxruntime: only when asked for

        return OnnxRunner.open(model, folder, threads=threads or torch.get_num_threads())
    raise ValueError(f"unknown backend {options.backend!r}: expected one of {', '.join(BACKENDS)}")


@dataclass
class Sequence:
    """One request's state: committed tokens, their KV, and the prediction for the next token."""

    kv: list[LayerKV]
    capacity: int
    tokens: list[int] = field(default_factory=list)  # tokens whose keys/values are in `kv`
    last_hidden: Tensor | None = None  # final hidden state of tokens[-1]: predicts the next token
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    forward_passes: int = 0
    # Prompt tokens left out of the prefill (start(defer_tail=True)): the caller's first step commits them,
    # so the prefill's last chunk and the first block share one forward pass.
    deferred: list[int] = field(default_factory=list)

    @property
    def length(self) -> int:
        return len(self.tokens)


class Engine:
    def __init__(
        self,
        model: CausalLM,
        tokenizer: TextTokenizer,
        options: EngineOptions | None = None,
        runner: ForwardRunner | None = None,
    ) -> None:
        self.options = options or EngineOptions()
        self.model = model
        self.runner = runner or make_runner(model, self.options)
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        page_size = self.cache_page_size(self.options)
        self.cache = RadixPrefixCache(page_size=page_size, byte_budget=self.options.cache_bytes)
        self.lock = threading.RLock()
        cfg = model.config
        self.mask_token_id = cfg.mask_token_id if cfg.mask_token_id is not None else tokenizer.special.mask
        self.logit_bias = self._never_generated_bias()

    @classmethod
    def from_folder(cls, folder: str | Path, options: EngineOptions | None = None) -> Engine:
        options = options or EngineOptions()
        if options.backend not in BACKENDS:
            raise ValueError(f"unknown backend {options.backend!r}: expected one of {', '.join(BACKENDS)}")
        on_cuda = options.device.startswith("cuda")
        dtype = options.dtype or (torch.bfloat16 if on_cuda and options.backend == "torch" else torch.float32)
        model = load_model(folder, device=options.device, dtype=dtype)
        threads = options.threads or (1 if model.num_parameters() < 50_000_000 else os.cpu_count() or 1)
        if options.device == "cpu":
            torch.set_num_threads(threads)
        tokenizer = TextTokenizer.from_folder(folder, mask_token_id=model.config.mask_token_id)
        return cls(model, tokenizer, options, make_runner(model, options, folder, threads))

    def cache_page_size(self, options: EngineOptions) -> int:
        """Tokens per prefix-cache page: the option as given (a layout with blocks rounds it to whole blocks)."""
        return options.page_size

    # -- requests -------------------------------------------------------------------------------------

    def start(
        self,
        prompt_ids: list[int],
        reserve: int,
        interrupt: Callable[[], str | None] | None = None,
        defer_tail: bool = False,
    ) -> Sequence:
        """Prefill `prompt_ids` (reusing the longest cached prefix) with room for `reserve` more tokens.

        The engine lock is held per prefill chunk, not for the whole prompt, so a long prefill does not
        hold up other requests' passes; `interrupt` is checked before every chunk (PrefillInterrupted).
        With `defer_tail` the last chunk is not run but left in `seq.deferred` for the caller's first
        `step` to commit: a block decoder needs a pass over its first block anyway, and the prompt's new
        tokens ride along in it (one pass fewer per request)."""
        if not prompt_ids:
            raise ValueError("empty prompt: there is no token to predict from")
        with self.lock, torch.inference_mode():
            seq = self._new_sequence(len(prompt_ids) + reserve)
            reused = self._load_cached_prefix(seq, prompt_ids)
        seq.prompt_tokens, seq.cached_prompt_tokens = len(prompt_ids), reused
        rest = prompt_ids[reused:]
        chunks = [rest[i : i + self.options.prefill_chunk] for i in range(0, len(rest), self.options.prefill_chunk)]
        if defer_tail:
            seq.deferred = chunks.pop()
        for chunk in chunks:
            if interrupt is not None and (reason := interrupt()):
                raise PrefillInterrupted(reason)
            with self.lock, torch.inference_mode():
                hidden = self._forward(seq, chunk, n_causal=len(chunk))
            seq.tokens.extend(chunk)
            seq.last_hidden = hidden[-1]
        # The prefill counts as one pass however it was chunked; with `defer_tail` that pass is the caller's
        # first step, which runs the last chunk.
        seq.forward_passes = 0 if defer_tail else 1
        if self.options.use_prefix_cache:
            with self.lock, torch.inference_mode():
                self._cache_tokens(seq)
        return seq

    def step(self, seq: Sequence, commit_ids: list[int], block_ids: list[int]) -> Tensor:
        """One forward pass: append `commit_ids` causally to the sequence and run the noisy `block_ids`
        (bidirectional within the block, seeing all committed tokens). Returns the block's final hidden
        states [len(block_ids), hidden]; the output at block position j predicts block position j+1."""
        if not commit_ids and not block_ids:
            raise ValueError("a step needs tokens to commit or a block to look at")
        return self._pass(seq, commit_ids, block_ids)[len(commit_ids) :]

    def verify(self, seq: Sequence, ids: list[int]) -> Tensor:
        """One forward pass appending `ids` causally: the next token and a draft of the ones after it
        (speculative AR decoding). Returns every token's final hidden state [len(ids), hidden]; row i
        predicts the token after ids[i]. `truncate` then forgets the part of the draft that is not kept."""
        if not ids:
            raise ValueError("nothing to verify")
        return self._pass(seq, ids, [])

    def truncate(self, seq: Sequence, length: int, last_hidden: Tensor) -> None:
        """Keep the first `length` tokens; `last_hidden` is the kept last token's output. The dropped tokens'
        keys and values stay in the buffer past the end, where the next pass overwrites them and no
        attention reads them, and the prefix cache only ever takes `seq.tokens`."""
        if not 0 < length <= seq.length:
            raise ValueError(f"cannot truncate a sequence of {seq.length} tokens to {length}")
        del seq.tokens[length:]
        seq.last_hidden = last_hidden

    def logits(self, hidden: Tensor) -> Tensor:
        """fp32 logits for hidden states [..., hidden]; tokens that are never output get -inf."""
        with torch.inference_mode():
            logits = self.model.logits(hidden).float()
            return logits if self.logit_bias is None else logits + self.logit_bias

    def _never_generated_bias(self) -> Tensor | None:
        """-inf for the mask token, prompt-format tokens and the rows a checkpoint pads its vocabulary with
        (Qwen: 151,665 tokens, 151,936 rows; a padded id decodes to nothing): a decoder must never emit them."""
        special = self.tokenizer.special
        banned = {
            self.mask_token_id,
            special.fim_prefix,
            special.fim_suffix,
            special.fim_middle,
            special.fim_pad,
            special.explain_code,
            special.explain_text,
        } - {None}
        rows = self.model.config.vocab_size
        banned = {t for t in banned if t < rows} | set(range(self.tokenizer.vocab_size, rows))
        if not banned:
            return None
        bias = torch.zeros(rows, device=self.device)
        bias[list(banned)] = float("-inf")
        return bias

    def next_token_logits(self, seq: Sequence) -> Tensor:
        assert seq.last_hidden is not None
        return self.logits(seq.last_hidden)

    def finish(self, seq: Sequence) -> None:
        """Offer the sequence's committed tokens (prompt and generated) to the prefix cache."""
        if self.options.use_prefix_cache:
            with self.lock, torch.inference_mode():
                self._cache_tokens(seq)

    def clear_prefix_cache(self) -> None:
        """Drop every cached prefix (between requests: the next one is cold)."""
        with self.lock:
            self.cache.clear()

    def kv_bytes_per_token(self) -> int:
        cfg = self.model.config
        return 2 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * self.dtype.itemsize

    # -- internals ------------------------------------------------------------------------------------

    def _new_sequence(self, capacity: int) -> Sequence:
        return Sequence(kv=self.runner.new_kv(capacity), capacity=capacity)

    def _pass(self, seq: Sequence, commit_ids: list[int], block_ids: list[int]) -> Tensor:
        """One counted forward pass: `commit_ids` appended causally, then the noisy `block_ids`; the final
        hidden state of every input token."""
        if seq.length + len(commit_ids) + len(block_ids) > seq.capacity:
            raise ValueError(f"sequence capacity {seq.capacity} exceeded")
        with self.lock, torch.inference_mode():
            hidden = self._forward(seq, commit_ids + block_ids, n_causal=len(commit_ids))
            if commit_ids:
                seq.tokens.extend(commit_ids)
                seq.last_hidden = hidden[len(commit_ids) - 1]
            seq.forward_passes += 1
            return hidden

    def _forward(self, seq: Sequence, ids: list[int], n_causal: int) -> Tensor:
        past = seq.length
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        positions = torch.arange(past, past + len(ids), device=self.device)[None]
        plain_causal = past == 0 and n_causal == len(ids)
        mask = None if plain_causal else step_mask(past, n_causal, len(ids) - n_causal, self.device)
        return self.runner.forward(seq.kv, input_ids, positions, mask, past)[0]

    def _load_cached_prefix(self, seq: Sequence, prompt_ids: list[int]) -> int:
        """Copy the longest cached prefix into the sequence; keep at least one prompt token to prefill."""
        if not self.options.use_prefix_cache:
            return 0
        match = self.cache.match(prompt_ids)
        page = self.cache.page_size
        usable_pages = min(len(match.pages), (len(prompt_ids) - 1) // page)
        if usable_pages == 0:
            return 0
        n = usable_pages * page
        stacked = torch.cat(match.pages[:usable_pages], dim=3)  # [layers, 2, kv_heads, n, head_dim]
        for layer, kv in enumerate(seq.kv):
            kv.keys[0, :, :n] = stacked[layer, 0]
            kv.values[0, :, :n] = stacked[layer, 1]
        seq.tokens.extend(prompt_ids[:n])
        return n

    def _cache_tokens(self, seq: Sequence) -> None:
        page = self.cache.page_size

        def make_page(i: int) -> Tensor:
            s, e = i * page, (i + 1) * page
            return torch.stack([torch.stack((kv.keys[0, :, s:e], kv.values[0, :, s:e])) for kv in seq.kv])

        self.cache.insert(seq.tokens, make_page)
