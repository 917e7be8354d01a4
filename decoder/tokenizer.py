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
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>")  # chat models end an answer with these
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
    def __init__(
        self,
        tokenizer: Tokenizer,
        mask_token_id: int | None = None,
        mask_token: str | None = None,
        chat_template: str | None = None,
        token_config: dict | None = None,
    ) -> None:
        self.backend = tokenizer
        # Width of the model's logits when it exceeds the tokenizer's vocabulary (Qwen pads its embeddings
        # to 151936/152064 rows for ~151.6k tokens); set by whoever pairs the tokenizer with a model.
        self.logits_width: int | None = None
        # Jinja chat template of an instruct checkpoint (tokenizer_config.json or chat_template.jinja).
        self.chat_template = chat_template
        self.token_config = token_config or {}  # tokenizer_config.json as read (bos_token, eos_token, ...)

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
        token_config: dict = {}
        cfg_path = folder / "tokenizer_config.json"
        if cfg_path.is_file():
            try:
                loaded = json.loads(cfg_path.read_text(encoding="utf-8"))
                token_config = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                token_config = {}
        mask_token = _token_text(token_config.get("mask_token"))
        return cls(
            tok,
            mask_token_id=mask_token_id,
            mask_token=mask_token,
            chat_template=_read_chat_template(folder, token_config),
            token_config=token_config,
        )

    def token_id(self, name: str | None) -> int | None:
        """Id of a token given by its text (None if absent)."""
        return None if name is None else self.backend.token_to_id(name)

    def end_of_turn_ids(self) -> set[int]:
        """Tokens that end a chat answer: the named end-of-turn tokens and tokenizer_config's eos_token."""
        ids = {self.backend.token_to_id(n) for n in END_OF_TURN}
        ids.add(self.token_id(_token_text(self.token_config.get("eos_token"))))
        return {i for i in ids if i is not None}

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
        """Decoded text of every token id alone (used by token healing), one per logits row."""
        specials = self.special_ids()
        texts = ["" if i in specials else self.backend.decode([i]) for i in range(self.vocab_size)]
        return texts + [""] * max(0, (self.logits_width or 0) - len(texts))  # rows no token maps to


def _token_text(value: object) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or an AddedToken object (older files)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _read_chat_template(folder: Path, token_config: dict) -> str | None:
    """The default chat template: chat_template.jinja (newer exports) or tokenizer_config.json's entry,
    which is a string or a list of {"name", "template"} (the one named "default")."""
    path = folder / "chat_template.jinja"
    if path.is_file():
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
    template = token_config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    return template if isinstance(template, str) else None
