"""Byte-level BPE tokenizer trained on the code corpus, with the special tokens the decoders look for.

The special tokens take ids 0..7 in a fixed order so that every model this project trains agrees on them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

END_OF_TEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
FIM_PAD = "<|fim_pad|>"
MASK = "<|mask|>"
EXPLAIN_CODE = "<|explain_code|>"
EXPLAIN_TEXT = "<|explain_text|>"
SPECIAL_TOKENS = [END_OF_TEXT, FIM_PREFIX, FIM_MIDDLE, FIM_SUFFIX, FIM_PAD, MASK, EXPLAIN_CODE, EXPLAIN_TEXT]
SPECIAL_IDS = {name: i for i, name in enumerate(SPECIAL_TOKENS)}


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192, min_frequency: int = 2) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    # use_regex splits words/numbers/punctuation/whitespace runs first, as GPT-2 does, so merges stay
    # inside those pieces; without a prefix space the first word of a file encodes like any other.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    for name, tid in SPECIAL_IDS.items():
        if tok.token_to_id(name) != tid:
            raise RuntimeError(f"special token {name} got id {tok.token_to_id(name)}, expected {tid}")
    return tok


def tokenizer_config() -> dict:
    """tokenizer_config.json for transformers' PreTrainedTokenizerFast (not Qwen2Tokenizer: see design)."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": END_OF_TEXT,
        "pad_token": END_OF_TEXT,
        "mask_token": MASK,
        "additional_special_tokens": [t for t in SPECIAL_TOKENS if t not in (END_OF_TEXT, MASK)],
        "model_max_length": 4096,
        "clean_up_tokenization_spaces": False,
    }


def save_tokenizer(tok: Tokenizer, folder: str | Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")


def sample_texts(texts: Iterable[str], max_bytes: int) -> Iterator[str]:
    """The first `max_bytes` of text: BPE statistics settle long before the whole corpus is read."""
    seen = 0
    for text in texts:
        if seen >= max_bytes:
            return
        seen += len(text)
        yield text
