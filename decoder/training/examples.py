"""Training rows made on the fly from token streams: plain documents, FIM (SPM / PSM) and explain pairs.

Every row is exactly `seq_len` tokens. Plain rows are random windows of the `<|endoftext|>`-separated
document stream. FIM rows rearrange the window's first document piece into
  SPM: <|fim_suffix|> S <|fim_prefix|> P <|fim_middle|> M <|endoftext|>
  PSM: <|fim_prefix|> P <|fim_suffix|> S <|fim_middle|> M <|endoftext|>
with the middle cut at line boundaries (whole lines, as a multi-line completion) or at token boundaries
(rest of a line, as an inline completion). Explain rows pack consecutive
`<|explain_code|> code <|explain_text|> docstring <|endoftext|>` examples from their own stream.
FIM works on token ids, not text, so it needs no re-tokenization: a cut at token boundaries is what the
decoder sees too once token healing has backed off a partial token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from decoder.training.tokenizer_train import SPECIAL_IDS

EOT = SPECIAL_IDS["<|endoftext|>"]
FIM_PREFIX = SPECIAL_IDS["<|fim_prefix|>"]
FIM_MIDDLE = SPECIAL_IDS["<|fim_middle|>"]
FIM_SUFFIX = SPECIAL_IDS["<|fim_suffix|>"]
MASK = SPECIAL_IDS["<|mask|>"]
EXPLAIN_CODE = SPECIAL_IDS["<|explain_code|>"]


def newline_table(tokenizer) -> np.ndarray:
    """bool[vocab]: the token holds a newline, so a line's code starts after it. Byte-level BPE merges a newline
    with the next line's indentation but one space ("\n   " then " return"), so a cut after such a token is
    an indented line start, as token healing sees a cursor after indentation (it backs off one space)."""
    vocab = tokenizer.get_vocab_size()
    out = np.zeros(vocab, dtype=bool)
    for i in range(vocab):
        out[i] = "\n" in tokenizer.decode([i], skip_special_tokens=True)
    return out


def byte_table(tokenizer) -> np.ndarray:
    """int[vocab]: UTF-8 bytes each token stands for (0 for special tokens): the bits-per-byte denominator."""
    vocab = tokenizer.get_vocab_size()
    special = {t.content for t in tokenizer.get_added_tokens_decoder().values()}
    out = np.zeros(vocab, dtype=np.int64)
    for tok, i in tokenizer.get_vocab(with_added_tokens=True).items():
        # Byte-level BPE: every character of a token's string stands for exactly one byte.
        out[i] = 0 if tok in special else len(tok)
    return out


@dataclass
class MixConfig:
    fim_rate: float = 0.5  # share of document rows turned into FIM
    spm_rate: float = 0.5  # share of FIM rows in SPM order (the rest PSM)
    line_fim_rate: float = 0.5  # share of FIM middles cut at line boundaries
    explain_rate: float = 0.05  # share of rows taken from the explain stream


class Batcher:
    def __init__(
        self,
        docs: np.ndarray,
        seq_len: int,
        newline: np.ndarray,
        explain: np.ndarray | None = None,
        mix: MixConfig | None = None,
        seed: int = 0,
        extra_docs: np.ndarray | None = None,
        extra_rate: float = 0.0,
    ) -> None:
        if len(docs) <= seq_len + 1:
            raise ValueError(f"document stream of {len(docs)} tokens is shorter than a row of {seq_len}")
        if extra_docs is not None and len(extra_docs) <= seq_len + 1:
            raise ValueError(f"mixed-in stream of {len(extra_docs)} tokens is shorter than a row of {seq_len}")
        if not 0.0 <= extra_rate <= 1.0:
            raise ValueError(f"mix rate {extra_rate} is not in [0, 1]")
        self.docs = docs
        # A second corpus's document stream, windows drawn from it at `extra_rate`: a mix whose weights are set
        # here rather than by the corpora's sizes (a big wheel corpus would otherwise drown the stdlib).
        self.extra_docs = extra_docs
        self.extra_rate = extra_rate if extra_docs is not None else 0.0
        self.seq_len = seq_len
        self.newline = newline
        self.mix = mix or MixConfig()
        self.rng = np.random.default_rng(seed)
        self.explain = explain if explain is not None and len(explain) > seq_len else None
        self.explain_starts = None
        if self.explain is not None:
            starts = np.flatnonzero(np.asarray(self.explain) == EXPLAIN_CODE)
            lengths = np.diff(np.append(starts, len(self.explain)))
            ok = starts + seq_len <= len(self.explain)
            # Prefer examples that fit in a row: a truncated one never reaches its docstring.
            fits = ok & (lengths <= seq_len)
            self.explain_starts = starts[fits] if fits.any() else starts[ok]
            if len(self.explain_starts) == 0:
                self.explain = None

    def batch(self, batch_size: int) -> torch.Tensor:
        rows = np.empty((batch_size, self.seq_len), dtype=np.int64)
        for r in range(batch_size):
            rows[r] = self.row()
        return torch.from_numpy(rows)

    def row(self) -> np.ndarray:
        L, rng, mix = self.seq_len, self.rng, self.mix
        if self.explain is not None and rng.random() < mix.explain_rate:
            s = int(rng.choice(self.explain_starts))
            return np.asarray(self.explain[s : s + L], dtype=np.int64)
        window = self.window()
        if rng.random() >= mix.fim_rate:
            return window
        return self.fim(window)

    def window(self) -> np.ndarray:
        """A random `seq_len`-token window of the document stream (or, at `extra_rate`, of the mixed-in one)."""
        docs = self.docs
        if self.extra_rate and self.rng.random() < self.extra_rate:
            docs = self.extra_docs
        s = int(self.rng.integers(0, len(docs) - self.seq_len))
        return np.asarray(docs[s : s + self.seq_len], dtype=np.int64)

    def fim(self, window: np.ndarray) -> np.ndarray:
        """Rearrange the first document piece of `window` into a FIM example; keep the length."""
        L, rng = self.seq_len, self.rng
        eots = np.flatnonzero(window[: L - 4] == EOT)
        n = int(eots[0]) if len(eots) else L - 4
        if n < 8:
            return window
        # The piece's own <|endoftext|> (at n) is replaced by the one after the middle: the row keeps one.
        piece, tail = window[:n], window[n + 1 : L - 3]
        if rng.random() < self.mix.line_fim_rate:
            bounds = np.concatenate(([0], np.flatnonzero(self.newline[piece]) + 1))
            bounds = bounds[bounds < n]
            if len(bounds) < 2:
                return window
            i, j = np.sort(rng.choice(bounds, size=2, replace=False))
            # Usually one to a few lines: cap the middle so the model sees completion-sized spans.
            nxt = bounds[bounds > i]
            j = int(min(j, nxt[min(len(nxt) - 1, int(rng.integers(0, 4)))]))
            i = int(i)
        else:
            i = int(rng.integers(0, n))
            # Log-uniform middle length: mostly short spans (rest of a line), sometimes long ones.
            m = int(np.exp(rng.uniform(0.0, np.log(n - i + 1))))
            j = min(n, i + max(1, m))
        pre, mid, suf = piece[:i], piece[i:j], piece[j:]
        if rng.random() < self.mix.spm_rate:
            head = [[FIM_SUFFIX], suf, [FIM_PREFIX], pre]
        else:
            head = [[FIM_PREFIX], pre, [FIM_SUFFIX], suf]
        out = np.concatenate([*head, [FIM_MIDDLE], mid, [EOT], tail]).astype(np.int64)
        assert len(out) == L, (len(out), L)
        return out


def eval_windows(stream: np.ndarray, seq_len: int, n: int) -> torch.Tensor:
    """`n` evenly spaced, non-overlapping windows of a validation stream (deterministic)."""
    count = min(n, len(stream) // seq_len)
    if count == 0:
        raise ValueError(f"validation stream of {len(stream)} tokens is shorter than one window")
    stride = len(stream) // count
    starts = np.arange(count) * stride
    return torch.from_numpy(np.stack([np.asarray(stream[s : s + seq_len], dtype=np.int64) for s in starts]))
