"""The checkpoint's tokenizer (`tokenizer.json`, read with the `tokenizers` library) and its special tokens.

We read tokenizer.json directly rather than through transformers' AutoTokenizer: for a folder holding a
qwen2 config.json, AutoTokenizer returns Qwen2Tokenizer, which replaces a self-trained pre-tokenizer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from tokenizers import Tokenizer

# Names the special tokens go by in the checkpoints we support, ours first.
FIM_PREFIX = ("<|fim_prefix|>", "<fim_prefix>")
FIM_SUFFIX = ("<|fim_suffix|>", "<fim_suffix>")
FIM_MIDDLE = ("<|fim_middle|>", "<fim_middle>")
FIM_PAD = ("<|fim_pad|>",)
END_OF_TEXT = ("<|endoftext|>", "</s>", "<|end_of_text|>")
MASK = ("<|mask|>", "[MASK]", "|<MASK>|", "<|MASK|>", "<mask>")
EXPLAIN_CODE = ("<|explain_code|>",)
EXPLAIN_TEXT = ("<|explain_text|>",)


class TokenizerError(RuntimeError):
    pass


@dataclass(frozen=True)
class SpecialTokens:
    end_of_text: int | None
    mask: int | None
    fim_prefix: int | None
    fim_suffix: int | None
    fim_middle: int | None
    fim_pad: int | None
    explain_code: int | None
    explain_text: int | None

    @property
    def has_fim(self) -> bool:
        return None not in (self.fim_prefix, self.fim_suffix, self.fim_middle)


class TextTokenizer:
    def __init__(self, tokenizer: Tokenizer, mask_token_id: int | None = None, mask_token: str | None = None) -> None:
        self.backend = tokenizer

        def find(names: tuple[str, ...]) -> int | None:
            for name in names:
                tid = tokenizer.token_to_id(name)
                if tid is not None:
                    return tid
            return None

        mask = mask_token_id
        if mask is None and mask_token is not None:
            mask = tokenizer.token_to_id(mask_token)
        if mask is None:
            mask = find(MASK)
        self.special = SpecialTokens(
            end_of_text=find(END_OF_TEXT),
            mask=mask,
            fim_prefix=find(FIM_PREFIX),
            fim_suffix=find(FIM_SUFFIX),
            fim_middle=find(FIM_MIDDLE),
            fim_pad=find(FIM_PAD),
            explain_code=find(EXPLAIN_CODE),
            explain_text=find(EXPLAIN_TEXT),
        )

    @classmethod
    def from_folder(cls, folder: str | Path, mask_token_id: int | None = None) -> TextTokenizer:
        folder = Path(folder)
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise TokenizerError(f"no tokenizer.json in {folder}")
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust library raises a bare Exception on malformed files
            raise TokenizerError(f"cannot read {path}: {exc}") from exc
        mask_token = None
        cfg_path = folder / "tokenizer_config.json"
        if cfg_path.is_file():
            try:
                mask_token = json.loads(cfg_path.read_text()).get("mask_token")
            except (OSError, ValueError):
                mask_token = None
            if isinstance(mask_token, dict):  # older AddedToken serialisation
                mask_token = mask_token.get("content")
        return cls(tok, mask_token_id=mask_token_id, mask_token=mask_token)

    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.backend.decode(ids, skip_special_tokens=False)

    def special_ids(self) -> set[int]:
        return {
            t.content and self.backend.token_to_id(t.content)
            for t in self.backend.get_added_tokens_decoder().values()
            if t.special
        }

    @cached_property
    def token_texts(self) -> list[str]:
        """Decoded text of every token id alone (used by token healing)."""
        specials = self.special_ids()
        return ["" if i in specials else self.backend.decode([i]) for i in range(self.vocab_size)]
