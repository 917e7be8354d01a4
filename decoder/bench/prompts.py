"""Benchmark prompts cut from held-out standard-library files (never trained on), as token ids.

Every decoder (and llama.cpp) gets the same ids, so latency differences are the decoders', not the prompts'.
"""

from __future__ import annotations

from dataclasses import dataclass

from decoder.evaluation.tasks import HeldoutFile, build_tasks, stdlib_heldout_files
from decoder.prompts import fim_prompt
from decoder.tokenizer import TextTokenizer


@dataclass(frozen=True)
class BenchPrompt:
    name: str  # where it was cut (file:line:col), or what it is
    ids: list[int]
    prefix: str = ""
    suffix: str = ""


def fim_prompts(tokenizer: TextTokenizer, count: int, seed: int = 0, order: str = "spm") -> list[BenchPrompt]:
    """`count` FIM prompts at the cursor positions `parafill eval` uses for its line tasks (prefix up to 2400
    characters, suffix up to 800), without token healing: the same ids for every decoder."""
    tasks = build_tasks(stdlib_heldout_files(), "line", count, seed)
    out = []
    for task in tasks[:count]:
        ids = fim_prompt(tokenizer, task.prefix, task.suffix, order, token_healing=False).ids
        out.append(BenchPrompt(task.name, ids, task.prefix, task.suffix))
    return out


def long_code(files: list[HeldoutFile] | None = None) -> str:
    """Held-out files joined end to end (enough text for a long context), in a fixed order."""
    files = files if files is not None else stdlib_heldout_files()
    return "\n\n".join(f.text for f in sorted(files, key=lambda f: f.name))


def context_prompt(
    tokenizer: TextTokenizer, code: str, tokens: int, typed: str = "", suffix_fraction: float = 0.125
) -> BenchPrompt:
    """An SPM FIM prompt of about `tokens` ids over `code`: the suffix is the text after the cursor (an eighth
    of the budget), the prefix fills the rest. `typed` is appended to the prefix: a keystroke at the cursor,
    which changes only the tail of an SPM prompt (the case the prefix cache is for)."""
    ids = tokenizer.encode(code)
    n_suffix = max(1, int(tokens * suffix_fraction))
    n_prefix = tokens - n_suffix - 3
    if n_prefix + n_suffix > len(ids):
        raise ValueError(f"the code holds {len(ids)} tokens, fewer than the {tokens} asked for")
    prefix = tokenizer.decode(ids[:n_prefix])
    suffix = tokenizer.decode(ids[n_prefix : n_prefix + n_suffix])
    prompt = fim_prompt(tokenizer, prefix + typed, suffix, "spm", token_healing=False)
    return BenchPrompt(f"context {tokens}" + (" +typed" if typed else ""), prompt.ids, prefix + typed, suffix)
