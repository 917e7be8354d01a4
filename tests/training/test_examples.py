from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from decoder.training import corpus as C
from decoder.training.examples import (
    EOT,
    EXPLAIN_CODE,
    FIM_MIDDLE,
    FIM_PREFIX,
    FIM_SUFFIX,
    Batcher,
    MixConfig,
    byte_table,
    newline_table,
)


def make(tiny_corpus: Path, **mix) -> tuple[Batcher, Tokenizer]:
    tok = Tokenizer.from_file(str(tiny_corpus / "tokenizer.json"))
    batcher = Batcher(
        C.load_shard(tiny_corpus / "train.bin"),
        64,
        newline_table(tok),
        explain=C.load_shard(tiny_corpus / "explain_train.bin"),
        mix=MixConfig(**mix),
        seed=0,
    )
    return batcher, tok


def test_fim_rows_keep_length_and_hold_one_of_each_sentinel(tiny_corpus: Path) -> None:
    batcher, _ = make(tiny_corpus, fim_rate=1.0, explain_rate=0.0)
    orders = set()
    for _ in range(50):
        row = batcher.row()
        assert row.shape == (64,)
        if row[0] in (FIM_PREFIX, FIM_SUFFIX):
            assert [int((row == t).sum()) for t in (FIM_PREFIX, FIM_SUFFIX, FIM_MIDDLE)] == [1, 1, 1]
            mid = int(np.flatnonzero(row == FIM_MIDDLE)[0])
            assert EOT in row[mid:]  # the middle ends with <|endoftext|>
            orders.add(int(row[0]))
    assert orders == {FIM_PREFIX, FIM_SUFFIX}  # both SPM and PSM


def test_fim_rearrangement_preserves_the_text(tiny_corpus: Path) -> None:
    batcher, tok = make(tiny_corpus, fim_rate=1.0, explain_rate=0.0, spm_rate=0.0)
    window = np.asarray(batcher.docs[:64], dtype=np.int64)
    row = batcher.fim(window)
    if row[0] == FIM_PREFIX:
        s, m = int(np.flatnonzero(row == FIM_SUFFIX)[0]), int(np.flatnonzero(row == FIM_MIDDLE)[0])
        end = m + 1 + int(np.flatnonzero(row[m + 1 :] == EOT)[0])
        pre, suf, mid = row[1:s], row[s + 1 : m], row[m + 1 : end]
        rebuilt = np.concatenate([pre, mid, suf])
        assert tok.decode(rebuilt.tolist()) == tok.decode(window[: len(rebuilt)].tolist())


def test_line_fim_cuts_at_indented_line_starts_too(tiny_corpus: Path) -> None:
    _, tok = make(tiny_corpus)
    table = newline_table(tok)
    ids = tok.encode("class A:\n    def f(self):\n        return 1\n").ids
    starts = {len(tok.decode(ids[: k + 1])) for k in range(len(ids)) if table[ids[k]]}
    text = tok.decode(ids)
    # After each newline: the line's code, or the last space of its indentation (token healing backs off one).
    for line_start in (i + 1 for i, ch in enumerate(text) if ch == "\n" and i + 1 < len(text)):
        code = line_start + len(text[line_start:]) - len(text[line_start:].lstrip(" "))
        assert {code, code - 1} & starts, repr(text[line_start : code + 8])


def test_fim_rows_hold_one_end_of_text_where_the_document_had_one(tiny_corpus: Path) -> None:
    batcher, _ = make(tiny_corpus, fim_rate=1.0, explain_rate=0.0, line_fim_rate=0.0)
    text = np.asarray(batcher.docs[:5_000], dtype=np.int64)
    text = text[text != EOT]
    window = np.concatenate([text[:30], [EOT], text[100:133]])  # a 30-token document, then the next one
    for _ in range(20):
        row = batcher.fim(window)
        assert row[0] in (FIM_PREFIX, FIM_SUFFIX) and len(row) == 64
        assert int((row == EOT).sum()) == 1  # after the middle, as the document's end; not twice in a row
        assert row[int(np.flatnonzero(row == EOT)[0]) + 1] == text[100]  # then the next document


def test_explain_rows_start_at_an_example_and_fit(tiny_corpus: Path) -> None:
    batcher, tok = make(tiny_corpus, explain_rate=1.0)
    row = batcher.row()
    assert row[0] == EXPLAIN_CODE
    assert "<|explain_text|>" in tok.decode(row.tolist(), skip_special_tokens=False)


def test_byte_table_counts_utf8_bytes(tiny_corpus: Path) -> None:
    tok = Tokenizer.from_file(str(tiny_corpus / "tokenizer.json"))
    table = byte_table(tok)
    text = "def f(x):\n    return 'é'\n"
    ids = tok.encode(text).ids
    assert int(table[ids].sum()) == len(text.encode("utf-8"))
    assert table[:8].sum() == 0  # special tokens stand for no bytes


def test_a_mixed_in_stream_gives_its_share_of_the_windows(tiny_corpus: Path) -> None:
    tok = Tokenizer.from_file(str(tiny_corpus / "tokenizer.json"))
    main = C.load_shard(tiny_corpus / "train.bin")
    marker = int(main.max()) + 1  # a token the main stream never holds
    extra = np.full(1000, marker, dtype=main.dtype)
    batcher = Batcher(main, 64, newline_table(tok), mix=MixConfig(fim_rate=0.0), extra_docs=extra, extra_rate=0.3)
    from_extra = sum(bool((batcher.window() == marker).all()) for _ in range(2000))
    assert 500 <= from_extra <= 700  # 30% of 2000, binomial sd about 20
    alone = Batcher(main, 64, newline_table(tok), mix=MixConfig(fim_rate=0.0), extra_docs=extra, extra_rate=0.0)
    assert not any((alone.window() == marker).any() for _ in range(200))


def test_a_mixed_in_stream_shorter_than_a_row_is_refused(tiny_corpus: Path) -> None:
    tok = Tokenizer.from_file(str(tiny_corpus / "tokenizer.json"))
    main = C.load_shard(tiny_corpus / "train.bin")
    with pytest.raises(ValueError, match="mixed-in stream"):
        Batcher(main, 64, newline_table(tok), extra_docs=main[:10], extra_rate=0.5)
