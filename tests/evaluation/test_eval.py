"""Evaluation metrics, task cutting and the `parafill eval` report on a tiny model."""

from __future__ import annotations

import argparse
import json
import math
from functools import partial

import pytest

from decoder.engine import Engine
from decoder.evaluation.cli import MAX_NEW_TOKENS, add_eval_arguments, run_eval
from decoder.evaluation.metrics import (
    confidence_coverage,
    edit_similarity,
    exact_match,
    kendall_tau,
    leftmost_commit_fraction,
    position_order_tau,
    stutter,
    stutters,
)
from decoder.evaluation.parallel import split_configs, worker_threads
from decoder.evaluation.runner import DecodeConfig, decode_task, equal_shares, run_configs
from decoder.evaluation.tasks import (
    HeldoutFile,
    allocate,
    block_tasks,
    build_tasks,
    explain_tasks,
    line_tasks,
    literal_table_lines,
    stdlib_heldout_files,
    wheel_heldout_files,
)
from decoder.families import CAUSAL
from decoder.machine import cpu_name

SOURCE = """import os


def walk(root):
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if os.path.isdir(path):
            yield from walk(path)
        else:
            yield path


class Counter:
    def __init__(self):
        self.count = 0
"""


def test_metrics_definitions():
    assert exact_match("  return  x + 1", "return x + 1")
    assert not exact_match("return x", "return x + 1")
    assert edit_similarity("abcd", "abcd") == 1.0
    assert edit_similarity("abcd", "abce") == pytest.approx(0.75)
    # Left to right, one per step: fully AR. All at once: no AR-like step.
    assert leftmost_commit_fraction([1, 2, 3, 4], 4) == 1.0
    assert leftmost_commit_fraction([1, 1, 1, 1], 4) == 0.0
    assert leftmost_commit_fraction([2, 1, 3, 3], 4) == pytest.approx(1 / 3)
    assert kendall_tau([0, 1, 2], [1, 2, 3]) == 1.0 and kendall_tau([0, 1, 2], [3, 2, 1]) == -1.0
    assert position_order_tau([1, 2, 3, 4, 4, 3, 2, 1], 4) == 0.0


def test_stutter_is_a_word_repeated_back_to_back_that_the_target_does_not_repeat():
    # The shipped model's t=0.1 demo line, and lines from its eval where the paired positions chose alike.
    assert stutters("for line in line in in in in in in(line)") == 5
    assert stutter("if o o o o:", "int):") and stutter("__ __ def def __eq__", "[self, right]")
    # Not a stutter: the same word apart, across a line break, as part of a longer word, or where the target
    # repeats it too.
    assert stutters("for line in lines: line = line.strip()") == 0
    assert stutters("return\nreturn") == 0 and stutters("a ab abc") == 0
    assert not stutter("not not x", "not not x") and stutter("not not x", "not x")


def test_bits_per_byte_gives_every_file_an_equal_share_of_the_tokens():
    assert equal_shares([30_000, 500, 2_000, 6_000], 8_000) == [2_750, 500, 2_000, 2_750]
    assert equal_shares([10, 20], 100) == [10, 20]  # all of them when the budget covers them
    assert sum(equal_shares([7, 9, 11], 20)) == 20 and equal_shares([], 5) == []


def test_confidence_coverage_keeps_the_surest_completions():
    confidences = [0.9, None, 0.2, 0.6]
    em, es = [True, False, False, False], [1.0, 0.0, 0.2, 0.5]
    table = confidence_coverage(confidences, em, es, shares=(1.0, 0.5, 0.25))
    assert [row["tasks"] for row in table] == [4, 2, 1]
    assert table[0]["edit_similarity"] == pytest.approx(0.425) and table[0]["min_confidence"] == 0.0
    assert table[1] == {"keep": 0.5, "tasks": 2, "min_confidence": 0.6, "exact_match": 0.5, "edit_similarity": 0.75}
    assert table[2]["exact_match"] == 1.0 and table[2]["min_confidence"] == 0.9
    assert confidence_coverage([], [], []) == []
    # The gate is rounded down: a minConfidence rounded up would hold back the completion that set it.
    assert confidence_coverage([0.12349, 0.1], [False] * 2, [0.0] * 2, shares=(0.5,))[0]["min_confidence"] == 0.1234


def test_tasks_reassemble_the_file():
    f = HeldoutFile("walk.py", SOURCE)
    for task in line_tasks(f, 4) + block_tasks(f, 2):
        assert task.target.strip()
        assert task.prefix + task.target + task.suffix in SOURCE
    lines = line_tasks(f, 4)
    assert all("\n" not in t.target for t in lines)
    assert line_tasks(f, 4) == lines  # deterministic


def test_explain_tasks_hide_the_docstring_and_ask_for_its_summary():
    documented = SOURCE.replace(
        "def walk(root):\n", 'def walk(root):\n    """Yield every file below root.\n\n    Depth first.\n    """\n'
    )
    tasks = explain_tasks([HeldoutFile("walk.py", documented)], 5)
    assert [(t.name, t.target) for t in tasks] == [("walk.py#0", "Yield every file below root.")]
    assert tasks[0].code.startswith("def walk(root):\n    for name") and '"""' not in tasks[0].code
    assert explain_tasks([HeldoutFile("walk.py", documented)], 5) == tasks  # deterministic


def test_tasks_are_shared_by_the_square_root_of_what_each_file_can_give():
    quota = allocate({"big.py": 400, "small.py": 25, "tiny.py": 1, "empty.py": 0}, 50)
    assert sum(quota.values()) == 50 and quota["empty.py"] == 0 and quota["tiny.py"] == 1
    assert quota["big.py"] == 39 and quota["small.py"] == 10  # 20 : 5 (the square roots), after tiny's one
    # A file with fewer than its share gives all it has; the rest goes to the others.
    assert allocate({"a.py": 100, "b.py": 100, "c.py": 2}, 60) == {"a.py": 29, "b.py": 29, "c.py": 2}
    assert allocate({"a.py": 3, "b.py": 4}, 100) == {"a.py": 3, "b.py": 4}  # fewer than asked: all of them
    assert allocate({"a.py": 9, "b.py": 9}, 7) in ({"a.py": 4, "b.py": 3}, {"a.py": 3, "b.py": 4})


def test_a_small_file_weighs_less_than_a_large_one_but_is_not_drowned():
    small = HeldoutFile("small.py", SOURCE)
    large = HeldoutFile("large.py", SOURCE * 16)
    names = [t.name.split(":")[0] for t in build_tasks([small, large], "line", 20)]
    assert len(names) == 20
    assert 2 <= names.count("small.py") < names.count("large.py")
    assert build_tasks([small, large], "line", 20) == build_tasks([small, large], "line", 20)  # deterministic


TABLE = "CODES = {\n" + "".join(f"    'k{i}': 0x{i:04x},\n" for i in range(12)) + "}\n"
SHORT_TABLE = "PAIR = {\n    'a': 1,\n    'b': -2,\n}\n"
COMPUTED = "NAMES = [\n" + "".join(f"    str({i}),\n" for i in range(12)) + "]\n"
PROSE = 'HELP = """\n' + "".join(f"line {i} of the help text\n" for i in range(12)) + '"""\n'


def test_lines_of_literal_tables_are_not_tasks():
    text = SOURCE + TABLE + SHORT_TABLE + COMPUTED + PROSE
    lines = text.split("\n")
    table_start = SOURCE.count("\n")
    # The 14 lines of the 12-entry table; not the short table, the list of calls, or the long string.
    assert literal_table_lines(text) == set(range(table_start, table_start + 14))
    assert literal_table_lines("x = (\n") == set()  # does not parse: nothing left out
    f = HeldoutFile("tables.py", text)
    cut = line_tasks(f, 1000) + block_tasks(f, 1000)
    assert cut and not [
        t for t in cut if t.name.split(":")[1] in {str(i + 1) for i in range(table_start, table_start + 14)}
    ]
    assert any("str(" in t.prefix.split("\n")[-1] + t.target for t in line_tasks(f, 1000)), "computed list kept"
    assert lines[table_start] == "CODES = {"


def test_heldout_files_are_named_and_not_empty():
    files = stdlib_heldout_files()
    assert files and all(f.name.endswith(".py") and f.text for f in files)


def _module(seed: int, lines: int = 40) -> str:
    """A module whose lines are long and its own (distinctive, for the near-copy rule)."""
    return "\n".join(f"value_{seed}_{i} = compute_something_long({seed}, {i}, 'x')" for i in range(lines)) + "\n"


def _write_val_split(folder, entries: list[tuple[str, str, str]]) -> None:
    """val_files.jsonl and manifest.json as `parafill corpus` writes them: (source, path, text) per held-out file."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"source": s, "path": p, "module": p, "text": t, "split": "val"} for s, p, t in entries]
    (folder / "val_files.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = [{k: r[k] for k in ("source", "path", "split")} for r in rows]
    (folder / "manifest.json").write_text(json.dumps({"files": manifest}))


def test_wheel_heldout_files_take_one_file_a_wheel_and_no_copy_of_what_was_trained(tmp_path):
    vendored = _module(9)
    _write_val_split(
        tmp_path / "corpus",
        [
            ("stdlib", "json/x.py", _module(1)),  # the stdlib set covers these
            ("wheel:a-1.0-py3-none-any.whl", "a-1.0-py3-none-any.whl!a/one.py", _module(2)),
            ("wheel:a-1.0-py3-none-any.whl", "a-1.0-py3-none-any.whl!a/two.py", _module(3)),
            ("wheel:b-2.0-py3-none-any.whl", "b-2.0-py3-none-any.whl!b/vendored.py", vendored),
            ("wheel:c-3.0-py3-none-any.whl", "c-3.0-py3-none-any.whl!c/big.py", _module(4, lines=4000)),
        ],
    )
    site = tmp_path / "site"
    (site / "lib").mkdir(parents=True)
    (site / "lib" / "vendored.py").write_text("# vendored\n" + vendored)  # a near-copy, not an exact one
    files = wheel_heldout_files(tmp_path / "corpus", limit_bytes=20_000, exclude_roots=[("site-packages", site)])
    names = [f.name for f in files]
    assert len(names) == 1 and names[0].startswith("a-1.0-py3-none-any.whl!a/")
    assert len(wheel_heldout_files(tmp_path / "corpus", 20_000, [], per_wheel=2)) == 3  # a's two and b's


def test_wheel_heldout_files_do_not_depend_on_projects_installed_after_the_corpus(tmp_path):
    text = _module(9)
    _write_val_split(tmp_path / "corpus", [("wheel:b-2.0-py3-none-any.whl", "b-2.0-py3-none-any.whl!b/core.py", text)])
    site = tmp_path / "site"
    (site / "b").mkdir(parents=True)
    (site / "b" / "core.py").write_text(text)  # project b, installed since the corpus read its wheel
    dist_info = site / "b-2.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: B\nVersion: 2.0\n")
    (dist_info / "RECORD").write_text("b/core.py,,\nb-2.0.dist-info/METADATA,,\nb-2.0.dist-info/RECORD,,\n")
    roots = [("site-packages", site)]
    assert [f.name for f in wheel_heldout_files(tmp_path / "corpus", 20_000, roots)] == [
        "b-2.0-py3-none-any.whl!b/core.py"
    ]
    # The same file outside b's RECORD could have been trained on: it is compared, and the copy left out.
    (dist_info / "RECORD").write_text("b-2.0.dist-info/METADATA,,\n")
    assert wheel_heldout_files(tmp_path / "corpus", 20_000, roots) == []


def test_eval_on_a_corpus_of_wheels_names_its_heldout_set(tiny_model_dir, tmp_path):
    _write_val_split(tmp_path / "corpus", [("wheel:a-1.0-py3-none-any.whl", "a.whl!a/walk.py", SOURCE)])
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    argv = ["--limit", "2", "--kinds", "line", "--thresholds", "0.5", "--bpb-tokens", "200"]
    args = parser.parse_args([*argv, "--heldout-corpus", str(tmp_path / "corpus")])
    report = run_eval(args, Engine.from_folder(tiny_model_dir), "tiny")
    assert report["heldout_files"] == ["a.whl!a/walk.py"] and "validation split" in report["heldout"]
    assert list(report["bits_per_byte_files"]) == ["a.whl!a/walk.py"]
    assert all(name.startswith("a.whl!a/walk.py:") for name in report["task_names"]["line"])
    _write_val_split(tmp_path / "empty", [("stdlib", "json/x.py", SOURCE)])
    with pytest.raises(SystemExit, match="no held-out files"):
        run_eval(parser.parse_args([*argv, "--heldout-corpus", str(tmp_path / "empty")]), None, "tiny")


def test_eval_report_has_every_metric(tiny_model_dir, tmp_path):
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    out = tmp_path / "r.json"
    args = parser.parse_args(
        [
            "--limit",
            "3",
            "--thresholds",
            "0.9,0.0",
            "--bpb-tokens",
            "500",
            "--json",
            str(out),
            "--plot",
            str(tmp_path / "r.png"),
            "--coverage-plot",
            str(tmp_path / "c.png"),
        ]
    )
    report = run_eval(args, Engine.from_folder(tiny_model_dir), "tiny")
    assert json.loads(out.read_text())["kinds"].keys() == {"line", "block", "explain"}
    (explain,) = report["kinds"].pop("explain")  # the explain route: AR only
    assert explain["mode"] == "ar" and explain["tasks"] == 3 and 0 <= explain["edit_similarity"] <= 1
    assert all("\n" not in s["prediction"] and "\n" not in s["target"] for s in explain["samples"])
    assert (tmp_path / "r.png").stat().st_size > 1000 and (tmp_path / "c.png").stat().st_size > 1000
    assert report["bits_per_byte"] > 0
    assert report["machine"]["cpu"] == cpu_name() and len(report["machine"]["load_average_end"]) == 3
    assert report["fallback_window"] == CAUSAL.fallback_window  # unset: decodes as the server does
    for kind, rows in report["kinds"].items():
        ar, strict, loose = rows
        # One token per AR pass, less the passes whose token fell past the stop rule's cut (not counted).
        assert ar["mode"] == "ar" and 0 < ar["tokens_per_forward"] < 1
        # Threshold 0 commits a whole block per pass: more parallel than 0.9.
        assert loose["tokens_per_forward"] > strict["tokens_per_forward"]
        for row in rows:
            assert 0 <= row["exact_match"] <= 1 and 0 <= row["edit_similarity"] <= 1
            assert row["cached_prompt_tokens"] >= row["tasks"]  # every timed request finds its prompt cached
            assert 0 <= row["edit_similarity_se"] <= 0.5 / math.sqrt(row["tasks"] - 1)  # a [0, 1] score's bound
            p = row["exact_match"]
            assert row["exact_match_se"] == pytest.approx(math.sqrt(p * (1 - p) / row["tasks"]), abs=1e-4)
            # Per-task scores, in the order of the report's task names, average to the row's figures.
            scores = row["task_scores"]
            assert len(scores["edit_similarity"]) == len(report["task_names"][kind]) == row["tasks"]
            assert sum(scores["edit_similarity"]) / row["tasks"] == pytest.approx(row["edit_similarity"], abs=1e-3)
            assert sum(scores["exact_match"]) / row["tasks"] == pytest.approx(row["exact_match"], abs=1e-3)
            assert sum(scores["stutter"]) / row["tasks"] == pytest.approx(row["stutter_rate"], abs=1e-3)
            q = row["stutter_rate"]
            assert row["stutter_rate_se"] == pytest.approx(math.sqrt(q * (1 - q) / row["tasks"]), abs=1e-4)
            assert len(row["stutter_samples"]) == min(5, sum(scores["stutter"]))
            assert all(stutter(s["prediction"], s["target"]) for s in row["stutter_samples"])
            everything = row["confidence_coverage"][0]
            assert everything["keep"] == 1.0 and everything["tasks"] == row["tasks"]
            assert everything["edit_similarity"] == pytest.approx(row["edit_similarity"], abs=1e-3)


def test_eval_lookup_row_scores_as_ar_in_fewer_passes(tiny_model_dir):
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    args = parser.parse_args(
        ["--kinds", "block", "--limit", "3", "--thresholds", "", "--bpb-tokens", "0", "--lookup", "8"]
    )
    ar, lookup = run_eval(args, Engine.from_folder(tiny_model_dir), "tiny")["kinds"]["block"]
    assert (ar["config"], lookup["config"]) == ("ar", "ar lookup 8")
    assert [s["prediction"] for s in lookup["samples"]] == [s["prediction"] for s in ar["samples"]]
    assert lookup["exact_match"] == ar["exact_match"] and lookup["edit_similarity"] == ar["edit_similarity"]
    assert lookup["tokens_per_forward"] > ar["tokens_per_forward"]


def test_eval_rows_from_several_processes_are_those_of_one(tiny_model_dir):
    """`--jobs 2`: rows computed by two worker processes, each with its own engine, in a one-process run's order
    and with its scores (fp32; the engine runs a tiny model on one thread in either; only latencies may differ)."""
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    argv = ["--kinds", "line,block", "--limit", "3", "--thresholds", "0.9,0.3", "--bpb-tokens", "0", "--lookup", "4"]
    open_engine = partial(Engine.from_folder, tiny_model_dir)
    parallel = run_eval(parser.parse_args([*argv, "--jobs", "2"]), open_engine(), "tiny", open_engine)
    single = run_eval(parser.parse_args(argv), open_engine(), "tiny")

    def scores(report: dict) -> dict:
        timing = ("latency_ms_p50", "latency_ms_p90")
        return {
            k: [{f: v for f, v in r.items() if f not in timing} for r in rows] for k, rows in report["kinds"].items()
        }

    assert (parallel["jobs"], single["jobs"]) == (2, 1)
    assert [r["config"] for r in parallel["kinds"]["line"]] == [
        "ar",
        "ar lookup 4",
        "block B=8 t=0.9",
        "block B=8 t=0.3",
    ]
    assert scores(parallel) == scores(single) and parallel["task_names"] == single["task_names"]


def test_a_worker_keeps_the_engines_threads_within_its_share_of_the_cores():
    assert worker_threads(engine_threads=1, cores=16, processes=2) == 1  # a small model: one thread is its best
    assert worker_threads(engine_threads=16, cores=16, processes=2) == 8  # a large one: half the cores each
    assert worker_threads(engine_threads=16, cores=2, processes=4) == 1


def test_eval_with_jobs_needs_a_way_to_open_the_model(tiny_model_dir):
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    args = parser.parse_args(["--kinds", "line", "--limit", "1", "--thresholds", "0.9", "--jobs", "2"])
    with pytest.raises(ValueError, match="--jobs"):
        run_eval(args, Engine.from_folder(tiny_model_dir), "tiny")


def test_the_plot_draws_each_block_setting_as_one_curve_over_its_thresholds():
    from decoder.evaluation.plots import _series

    def row(mode: str, threshold: float, lookup: int = 0) -> dict:
        return {"mode": mode, "threshold": threshold, "block_size": 8, "lookup_tokens": lookup, "config": mode}

    rows = [row("ar", 0.9), row("block", 0.2), row("block", 0.9), row("block", 0.5, 8), row("block", 0.9, 8)]
    series = _series(rows)
    assert list(series) == ["ar", "block B=8", "block B=8 lookup 8"]
    assert [r["threshold"] for r in series["block B=8"]] == [0.9, 0.2]  # strictest first: the curve runs right
    assert [r["threshold"] for r in series["block B=8 lookup 8"]] == [0.9, 0.5]


def test_the_plot_draws_stutter_only_where_every_row_counted_it():
    from decoder.evaluation.plots import _metrics

    scores = {"exact_match": 0.0, "edit_similarity": 0.2}
    counted = {"kinds": {"line": [{**scores, "stutter_rate": 0.01}, {**scores, "stutter_rate": 0.0}]}}
    before = {"kinds": {"line": [{**scores, "stutter_rate": 0.01}], "block": [scores]}}  # merged with an old one
    assert [m[0] for m in _metrics(counted)] == ["exact_match", "edit_similarity", "stutter_rate"]
    assert [m[0] for m in _metrics(before)] == ["exact_match", "edit_similarity"]


def test_rows_decoded_warm_task_by_task_score_as_cold_requests(tiny_model_dir):
    """run_configs prefills each task once and decodes it warm under every configuration: in fp32 each prediction
    and pass count is that of a cold request (cache cleared), and the timed requests did reuse the prompt."""
    engine = Engine.from_folder(tiny_model_dir)
    files = stdlib_heldout_files()
    configs = [
        DecodeConfig("ar"),
        DecodeConfig("block", 0.9),
        DecodeConfig("block", 0.0),
        DecodeConfig("ar", 0.9, 8, 4),
    ]
    for kind, tasks in (("line", build_tasks(files, "line", 4)), ("explain", explain_tasks(files, 2))):
        tasks = [t for t in tasks if t.kind == kind]
        kind_configs = configs if kind == "line" else configs[:1]
        rows = run_configs(engine, tasks, kind_configs, MAX_NEW_TOKENS, progress=False)
        for config, row in zip(kind_configs, rows, strict=True):
            cold = []
            for task in tasks:
                engine.clear_prefix_cache()
                cold.append(decode_task(engine, task, config, MAX_NEW_TOKENS[task.kind]))
            assert [s["prediction"] for s in row["samples"]] == [prediction for prediction, _ in cold][:5]
            assert row["task_scores"]["edit_similarity"] == [
                round(edit_similarity(p, t.target), 4) for (p, _), t in zip(cold, tasks, strict=True)
            ]
            passes = sum(gen.forward_passes for _, gen in cold)
            assert row["tokens_per_forward"] == round(sum(len(gen.token_ids) for _, gen in cold) / passes, 4)
            assert row["cached_prompt_tokens"] > 0 and all(gen.cached_prompt_tokens == 0 for _, gen in cold)


def test_configurations_are_split_into_runs_of_nearly_equal_length():
    configs = [DecodeConfig("block", t / 10) for t in range(7)]
    assert [len(g) for g in split_configs(configs, 2)] == [4, 3]
    assert [c for g in split_configs(configs, 3) for c in g] == configs  # in order, each once
    assert split_configs(configs, 1) == [tuple(configs)] and len(split_configs(configs[:2], 8)) == 2
