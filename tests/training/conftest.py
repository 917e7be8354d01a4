"""A tiny corpus folder (three packages of Python source) built once per session with a tiny tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from decoder.training.prepare import build_corpus

FUNCS = '''
def {name}_add(a, b):
    """Return the sum of a and b, for {name}."""
    total = a + b
    return total


def {name}_scale(values, factor=2):
    """Multiply every value by factor and return a new list."""
    out = []
    for v in values:
        out.append(v * factor)
    return out


class {cls}:
    def __init__(self, items=None):
        self.items = list(items or [])

    def push(self, item):
        self.items.append(item)
        return len(self.items)
'''


def write_tree(root: Path, n_packages: int = 12, files_per_package: int = 3) -> Path:
    for p in range(n_packages):
        pkg = root / f"pkg{p}"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text(f'"""Package {p} of the tiny test corpus."""\nVERSION = "{p}.0"\n' * 3)
        for f in range(files_per_package):
            text = FUNCS.format(name=f"p{p}f{f}", cls=f"Box{p}x{f}") * 2
            (pkg / f"mod{f}.py").write_text(text)
    return root


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = write_tree(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("corpus")
    # pkg0 is forced into validation so the tiny corpus always has a val split.
    messages: list[str] = []
    build_corpus(out, roots=[], folders=[src], vocab_size=400, holdout=frozenset({"pkg0"}), log=messages.append)
    (out.parent / f"{out.name}.log").write_text("\n".join(messages) + "\n")  # beside the corpus, not in it
    return out
