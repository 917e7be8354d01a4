"""Evaluation tasks cut from held-out Python files at deterministic positions.

- line: the cursor sits inside a line (after its indentation); the target is the rest of that line.
- block: the cursor sits at the start of a line inside an indented block, after its indentation; the
  target is that line and the following ones up to the end of the block (at most `max_lines`).
The suffix given to the model is the text after the target, as in an editor.
- explain: a documented function with its docstring taken out (as training's explain examples); the
  target is the docstring's summary line, to compare with the explanation's first line.
Line and block tasks are cut from code only: the lines of a literal table (`literal_table_lines`) are left out.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import random
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path

from decoder.training.corpus import (
    collect,
    default_roots,
    explain_pairs,
    heldout_files,
    installed_files,
    module_of,
    near_copy_pairs,
    split_of,
    wheel_projects,
)

PREFIX_CHARS = 2400
SUFFIX_CHARS = 800


@dataclass
class InfillTask:
    name: str  # file:line:col (1-based)
    kind: str  # "line" or "block"
    prefix: str
    suffix: str
    target: str
    indent: int


@dataclass
class ExplainTask:
    name: str  # file#n: the n-th documented function of the file (ast.walk order), 0-based
    code: str  # the function without its docstring
    target: str  # the docstring's first line
    kind: str = "explain"


@dataclass
class HeldoutFile:
    name: str
    text: str


def stdlib_heldout_files(limit_bytes: int = 400_000) -> list[HeldoutFile]:
    """Standard-library files whose module falls in the corpus' validation split (never trained on)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = str(path.relative_to(root))
        if "site-packages" in rel or rel.startswith(("test/", "idlelib/", "turtledemo/", "lib2to3/")):
            continue
        if split_of(module_of(rel)) != "val" or path.stat().st_size > limit_bytes:
            continue
        try:
            out.append(HeldoutFile(name=rel, text=path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return out


def wheel_heldout_files(
    corpus_dir: str | Path,
    limit_bytes: int = 400_000,
    exclude_roots: list[tuple[str, Path]] | None = None,
    per_wheel: int = 1,
) -> list[HeldoutFile]:
    """Files of the wheels in a corpus's validation split: code of other projects, as users write it, which
    neither that corpus's train split nor the stdlib held-out set holds. `per_wheel` files of each wheel (chosen
    by a hash of the path), so that a few big projects do not make up the set. Wheels of installed projects are
    not read by `parafill corpus`, and exact copies lose to the site-packages file, but a wheel may vendor a
    module found in site-packages: near-copies of `exclude_roots`' files (default: this interpreter's stdlib and
    site-packages, which the default corpus trains on) are left out. Files of a project installed after the
    corpus was built (one whose wheel it read) are not compared: a corpus built beside it had none of them, and
    comparing would make the set depend on what is installed now (an `onnx` extra took two files out of 158).
    Named `<wheel file>!<path>`."""
    held = [f for f in heldout_files(corpus_dir) if f.source.startswith("wheel:") and len(f.text) <= limit_bytes]
    roots = default_roots() if exclude_roots is None else exclude_roots
    installed_later = installed_files(roots, wheel_projects(corpus_dir))
    trained = [
        f.text
        for source, root in roots
        for f in collect([(source, root)])
        if (root / f.path).resolve() not in installed_later
    ]
    near = {i for _, i in near_copy_pairs([f.text for f in held], trained)}
    by_wheel: dict[str, list] = {}
    for i, f in enumerate(held):
        if i not in near:
            by_wheel.setdefault(f.source, []).append(f)
    chosen = [
        f
        for files in by_wheel.values()
        for f in sorted(files, key=lambda f: hashlib.sha256(f.path.encode()).hexdigest())[:per_wheel]
    ]
    return [HeldoutFile(name=f.path, text=f.text) for f in sorted(chosen, key=lambda f: f.path)]


def _rng(name: str, seed: int) -> random.Random:
    return random.Random(int(hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()[:12], 16))


def _is_code_line(line: str) -> bool:
    s = line.strip()
    return len(s) >= 8 and not s.startswith(("#", '"""', "'''", "@")) and any(c.isalpha() for c in s)


def _window(text: str, cursor: int, end: int) -> tuple[str, str]:
    prefix = text[:cursor][-PREFIX_CHARS:]
    suffix = text[end:][:SUFFIX_CHARS]
    return prefix, suffix


# A literal (dict, list, tuple, set of constants) spanning this many lines or more is a table of data.
LITERAL_TABLE_LINES = 10
# How line and block task positions are chosen (recorded in every report, as TASK_ALLOCATION is).
TASK_LINES = f"code lines; literal tables of {LITERAL_TABLE_LINES}+ lines left out"


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return _is_literal(node.operand)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k) for k in node.keys) and all(_is_literal(v) for v in node.values)
    return False


def literal_table_lines(text: str) -> set[int]:
    """0-based lines inside literal tables: html/entities.py's 2,200-line entity dict, a codec's character
    map. Completing them is recalling data, not writing code: once made tasks, the entity table alone gave 18%
    of the rest-of-line tasks (54 of 300). A file that does not parse keeps all its lines."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict | ast.List | ast.Tuple | ast.Set):  # a long string is prose, not a table
            span = node.end_lineno - node.lineno + 1 if node.end_lineno else 1
            if span >= LITERAL_TABLE_LINES and _is_literal(node):
                lines.update(range(node.lineno - 1, node.end_lineno))
    return lines


def _line_candidates(lines: list[str]) -> list[int]:
    tables = literal_table_lines("\n".join(lines))
    return [i for i, line in enumerate(lines) if i not in tables and _is_code_line(line) and len(line.strip()) <= 100]


def _block_candidates(lines: list[str]) -> list[int]:
    """Lines that open an indented block (the line before ends with ':')."""
    tables = literal_table_lines("\n".join(lines))
    candidates = []
    for i in range(1, len(lines)):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        if i not in tables and indent >= 4 and _is_code_line(line) and lines[i - 1].rstrip().endswith(":"):
            candidates.append(i)
    return candidates


def line_tasks(file: HeldoutFile, per_file: int, seed: int = 0) -> list[InfillTask]:
    lines = file.text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    candidates = _line_candidates(lines)
    rng = _rng(file.name, seed)
    tasks = []
    for i in sorted(rng.sample(candidates, min(per_file, len(candidates)))):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        body = line.rstrip()
        # Cursor after at least one character of code and before at least 3 characters of target.
        col = rng.randint(indent + 1, len(body) - 3)
        target = body[col:]
        if not target.strip():
            continue
        prefix, suffix = _window(file.text, offsets[i] + col, offsets[i] + len(line))
        tasks.append(InfillTask(f"{file.name}:{i + 1}:{col + 1}", "line", prefix, suffix, target, indent))
    return tasks


def block_tasks(file: HeldoutFile, per_file: int, seed: int = 0, max_lines: int = 6) -> list[InfillTask]:
    lines = file.text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    candidates = _block_candidates(lines)
    rng = _rng(file.name + ":block", seed)
    tasks = []
    for i in sorted(rng.sample(candidates, min(per_file, len(candidates)))):
        indent = len(lines[i]) - len(lines[i].lstrip())
        j = i + 1
        while j < len(lines) and j - i < max_lines:
            nxt = lines[j]
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) < indent:
                break
            j += 1
        body = "\n".join(lines[i:j]).rstrip()
        start = offsets[i] + indent
        prefix, suffix = _window(file.text, start, offsets[i] + len(body))
        tasks.append(InfillTask(f"{file.name}:{i + 1}:{indent + 1}", "block", prefix, suffix, body[indent:], indent))
    return tasks


# How the tasks of a kind are shared among the held-out files (recorded in every report).
TASK_ALLOCATION = "sqrt"


def allocate(capacities: dict[str, int], total: int) -> dict[str, int]:
    """`total` tasks shared among files in proportion to the square root of how many each can give
    (`capacities`), none above its capacity. An even split lets a 40-line codec module weigh as much as
    the 3,000-line typing.py; a split in proportion to size hands a file of data (an entity table) a fifth
    of the tasks; the square root sits between the two. Largest remainders, deterministic."""
    quota = {name: 0 for name in capacities}
    open_files = {name for name, cap in capacities.items() if cap > 0}
    left = min(total, sum(capacities.values()))
    while left > 0 and open_files:
        weight = {name: math.sqrt(capacities[name]) for name in open_files}
        scale = left / sum(weight.values())
        full = {name for name in open_files if quota[name] + weight[name] * scale >= capacities[name]}
        if full:  # these take all they have; the rest is shared again among the others
            for name in full:
                left -= capacities[name] - quota[name]
                quota[name] = capacities[name]
            open_files -= full
            continue
        shares = {name: weight[name] * scale for name in open_files}
        for name, share in shares.items():
            quota[name] += int(share)
        rest = left - sum(int(share) for share in shares.values())
        by_remainder = sorted(open_files, key=lambda name: (int(shares[name]) - shares[name], name))
        for name in by_remainder[:rest]:
            quota[name] += 1
        break
    return quota


def build_tasks(files: list[HeldoutFile], kind: str, limit: int, seed: int = 0) -> list[InfillTask]:
    """About `limit` tasks shared among the files by `allocate` (deterministic for a file set and seed)."""
    candidates = _line_candidates if kind == "line" else _block_candidates
    make = line_tasks if kind == "line" else block_tasks
    quota = allocate({f.name: len(candidates(f.text.split("\n"))) for f in files}, limit)
    tasks = [t for f in files for t in make(f, quota[f.name], seed)]
    return _rng(kind, seed).sample(tasks, len(tasks))


def explain_tasks(files: list[HeldoutFile], limit: int, seed: int = 0) -> list[ExplainTask]:
    """About `limit` documented functions shared among the files by `allocate` (deterministic)."""
    pairs_of = {
        file.name: [
            ExplainTask(f"{file.name}#{i}", code, doc.split("\n")[0])
            for i, (code, doc) in enumerate(explain_pairs(file.text))
        ]
        for file in files
    }
    quota = allocate({name: len(pairs) for name, pairs in pairs_of.items()}, limit)
    tasks = []
    for name, pairs in pairs_of.items():
        tasks += _rng(name + ":explain", seed).sample(pairs, quota[name])
    return _rng("explain", seed).sample(tasks, len(tasks))


def save_tasks(tasks: list[InfillTask], path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for t in tasks:
            f.write(json.dumps(asdict(t)) + "\n")


def load_tasks(path: str | Path) -> list[InfillTask]:
    with open(path, encoding="utf-8") as f:
        return [InfillTask(**json.loads(line)) for line in f if line.strip()]
