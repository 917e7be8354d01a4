"""Self-distillation rows for parallel block decoding: a real prompt, then the model's own greedy continuation.

Why: a block step commits a position only where the masked stream is confident, and on real code a small
model almost never is past a block's first token: the next tokens of real text are uncertain. The model's
own greedy continuation is a deterministic function of the prompt, so a masked stream trained on it can
become confident exactly where greedy AR decoding would write the same tokens anyway (the idea behind
consistency distillation for parallel decoding, e.g. CLLMs and dParallel's certainty forcing).

A row is `prompt_len` tokens of training data (mostly FIM prompts cut inside the middle, as an inline
completion is) followed by `gen_len` greedy tokens. `prompt_len` is a multiple of every training block
size, so the continuation fills whole blocks. The trainer scores the masked stream everywhere and the AR
stream only on the real prompt (training the AR head on its own output would only sharpen it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import Tensor

from decoder.checkpoint import load_model
from decoder.compute_dtype import resolve_compute_dtype
from decoder.model import CausalLM, LayerKV
from decoder.training import corpus as C
from decoder.training.examples import EOT, FIM_MIDDLE, Batcher, MixConfig, newline_table
from decoder.training.tokenizer_train import SPECIAL_IDS

ROWS_FILE = "rows.npy"
META_FILE = "distill.json"
# Prompt-format tokens are never generated (as in decoder.engine); end-of-text is.
NEVER_GENERATED = [i for name, i in SPECIAL_IDS.items() if name != "<|endoftext|>"]


@dataclass
class DistillSetConfig:
    model: str
    corpus: str
    out: str
    rows: int = 4096
    prompt_len: int = 192
    gen_len: int = 64
    batch_size: int = 32
    fim_rate: float = 0.8  # share of prompts that are FIM prompts cut inside the middle
    seed: int = 0
    threads: int | None = None
    dtype: str = "auto"  # bf16, fp32, or auto (bf16 where it is native: decoder/compute_dtype.py)
    device: str = "cpu"


def prompt_row(batcher: Batcher, prompt_len: int, rng: np.random.Generator) -> np.ndarray:
    """One prompt of exactly `prompt_len` tokens. A FIM row is cut at a random point of its middle (the
    cursor of an inline completion) and, if shorter, preceded by the end of another document and
    `<|endoftext|>`, as packed training rows are."""
    row = batcher.fim(batcher.window()) if rng.random() < batcher.mix.fim_rate else batcher.window()
    middles = np.flatnonzero(row == FIM_MIDDLE)
    if len(middles) == 0:
        return row[:prompt_len]
    m = int(middles[0])
    ends = np.flatnonzero(row[m + 1 :] == EOT)
    middle_len = int(ends[0]) if len(ends) else len(row) - m - 1
    cut = m + 1 + int(rng.integers(0, max(1, middle_len)))
    if cut >= prompt_len:
        return row[cut - prompt_len : cut]
    filler = batcher.window()[: prompt_len - cut]
    if len(filler):
        filler[-1] = EOT
    return np.concatenate((filler, row[:cut]))


@torch.inference_mode()
def greedy_continue(model: CausalLM, prompts: Tensor, n_new: int, banned: list[int]) -> Tensor:
    """[batch, n_new] greedy tokens after `prompts` [batch, prompt_len], with a key/value cache."""
    batch, plen = prompts.shape
    cfg = model.config
    weight = next(model.parameters())
    dev, dtype = weight.device, weight.dtype
    prompts = prompts.to(dev)
    shape = (batch, cfg.num_key_value_heads, plen + n_new, cfg.head_dim)
    kv = [
        LayerKV(torch.empty(shape, dtype=dtype, device=dev), torch.empty(shape, dtype=dtype, device=dev))
        for _ in range(cfg.num_hidden_layers)
    ]
    bias = torch.zeros(cfg.vocab_size, device=dev)
    bias[[b for b in banned if b < cfg.vocab_size]] = float("-inf")
    hidden = model(prompts, torch.arange(plen, device=dev).expand(batch, plen), kv=kv, kv_start=0)[:, -1]
    out = torch.empty(batch, n_new, dtype=torch.long, device=dev)
    for i in range(n_new):
        out[:, i] = (model.logits(hidden).float() + bias).argmax(-1)
        if i + 1 == n_new:
            break
        at = plen + i
        mask = torch.ones(1, at + 1, dtype=torch.bool, device=dev)
        pos = torch.full((batch, 1), at, device=dev)
        hidden = model(out[:, i : i + 1], pos, attn_mask=mask, kv=kv, kv_start=at)[:, -1]
    return out.cpu()


def build_distill_set(cfg: DistillSetConfig, log: Callable[[str], None] = print) -> Path:
    """Write OUT/rows.npy ([rows, prompt_len + gen_len] uint16) and OUT/distill.json; returns OUT."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    corpus = Path(cfg.corpus)
    tokenizer = Tokenizer.from_file(str(corpus / "tokenizer.json"))
    seq_len = cfg.prompt_len + cfg.gen_len
    rng = np.random.default_rng(cfg.seed)
    batcher = Batcher(
        C.load_shard(corpus / "train.bin"),
        seq_len,
        newline_table(tokenizer),
        mix=MixConfig(fim_rate=cfg.fim_rate),
        seed=cfg.seed,
    )
    batcher.rng = rng
    cfg = replace(cfg, dtype=resolve_compute_dtype(cfg.dtype, cfg.device))  # distill.json records what ran
    model = load_model(cfg.model, dtype=torch.bfloat16 if cfg.dtype == "bf16" else torch.float32).eval()
    model.to(cfg.device)
    if model.config.vocab_size != tokenizer.get_vocab_size():
        raise ValueError(f"model vocab {model.config.vocab_size} != corpus tokenizer {tokenizer.get_vocab_size()}")
    rows = np.empty((cfg.rows, seq_len), dtype=np.uint16)
    started = time.perf_counter()
    for lo in range(0, cfg.rows, cfg.batch_size):
        hi = min(cfg.rows, lo + cfg.batch_size)
        prompts = np.stack([prompt_row(batcher, cfg.prompt_len, rng) for _ in range(hi - lo)])
        gen = greedy_continue(model, torch.from_numpy(prompts.astype(np.int64)), cfg.gen_len, NEVER_GENERATED)
        rows[lo:hi, : cfg.prompt_len] = prompts
        rows[lo:hi, cfg.prompt_len :] = gen.numpy()
        rate = hi * cfg.gen_len / (time.perf_counter() - started)
        log(f"distill rows {hi:,}/{cfg.rows:,} ({rate:.0f} generated tokens/s)")
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / ROWS_FILE, rows)
    meta = asdict(cfg) | {"seconds": round(time.perf_counter() - started, 1), "seq_len": seq_len}
    (out / META_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    return out


class DistillRows:
    """Random batches of a distill set, with the AR-scored part (the real prompt) of each row."""

    def __init__(self, folder: str | Path, seq_len: int, block_sizes: tuple[int, ...]) -> None:
        folder = Path(folder)
        meta = json.loads((folder / META_FILE).read_text())
        self.rows = np.load(folder / ROWS_FILE, mmap_mode="r")
        self.prompt_len = int(meta["prompt_len"])
        if self.rows.shape[1] != seq_len:
            raise ValueError(f"distill rows are {self.rows.shape[1]} tokens, training rows {seq_len}")
        bad = [b for b in block_sizes if self.prompt_len % b]
        if bad:
            raise ValueError(f"distill prompt length {self.prompt_len} is not a multiple of block sizes {bad}")

    def batch(self, batch_size: int, rng: np.random.Generator) -> tuple[Tensor, Tensor]:
        """(rows [batch, seq_len], ar_scored [batch, seq_len - 1]): next-token loss only on real targets."""
        idx = np.sort(rng.integers(0, len(self.rows), size=batch_size))
        x = torch.from_numpy(np.asarray(self.rows[idx], dtype=np.int64))
        ar_scored = torch.zeros(batch_size, x.shape[1] - 1, dtype=torch.bool)
        ar_scored[:, : self.prompt_len - 1] = True  # output j predicts token j + 1, real while j + 1 < prompt_len
        return x, ar_scored
