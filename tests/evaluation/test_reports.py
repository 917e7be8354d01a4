"""`parafill report`: merging eval reports of one model and comparing two models task by task."""

from __future__ import annotations

import argparse
import copy
import json
import math
import re
import statistics
from pathlib import Path

import pytest

from decoder.engine import Engine
from decoder.evaluation.cli import add_eval_arguments, run_eval
from decoder.evaluation.reports import (
    ReportMismatch,
    compare_bits_per_byte,
    compare_reports,
    format_comparison,
    merge_reports,
    paired_difference,
    regressions,
)
from lsp_server.cli import main


def evaluate(engine: Engine, kinds: str, seed: int = 0, bpb_tokens: int = 0) -> dict:
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    args = parser.parse_args(
        ["--kinds", kinds, "--limit", "4", "--thresholds", "0.5", "--bpb-tokens", str(bpb_tokens), "--seed", str(seed)]
    )
    return run_eval(args, engine, "tiny")


@pytest.fixture(scope="module")
def reports(tiny_model_dir) -> dict[str, dict]:
    engine = Engine.from_folder(tiny_model_dir)
    return {
        "line": evaluate(engine, "line"),
        "block": evaluate(engine, "block"),
        "both": evaluate(engine, "line,block"),
        "other_tasks": evaluate(engine, "line", seed=1),
    }


def test_paired_difference_counts_and_interval():
    d = paired_difference([0.0, 0.5, 1.0, 0.2], [0.1, 0.6, 1.0, 0.3])
    assert d.mean == pytest.approx(0.075) and (d.wins, d.losses, d.tasks) == (3, 0, 4)
    assert d.se == pytest.approx(0.025)  # stdev of (0.1, 0.1, 0, 0.1) / sqrt(4)
    # Unpaired: both runs' spreads add up, though every task moved by 0.1 or 0.
    old_sd, new_sd = statistics.stdev([0.0, 0.5, 1.0, 0.2]), statistics.stdev([0.1, 0.6, 1.0, 0.3])
    assert d.unpaired_se == pytest.approx(math.hypot(old_sd, new_sd) / 2) and d.unpaired_se > 10 * d.se
    low, high = d.interval
    assert low == pytest.approx(0.075 - 1.96 * 0.025) and high == pytest.approx(0.075 + 1.96 * 0.025)
    assert d.verdict == "better"
    assert paired_difference([1, 0, 1, 0], [0, 1, 0, 1]).verdict == "same"  # as many up as down
    assert paired_difference([0.9] * 5 + [0.5], [0.4] * 5 + [0.5]).verdict == "worse"
    with pytest.raises(ReportMismatch):
        paired_difference([0.1], [0.1, 0.2])


def test_bits_per_byte_are_compared_file_by_file_on_the_same_bytes():
    old = {"bits_per_byte_files": {"a.py": [100.0, 100], "b.py": [80.0, 40], "c.py": [30.0, 20], "d.py": [9.0, 10]}}
    new = {"bits_per_byte_files": {"a.py": [90.0, 100], "b.py": [76.0, 40], "c.py": [29.0, 20], "d.py": [1.0, 12]}}
    saved = compare_bits_per_byte(old, new)  # d.py was scored on other bytes (another version of it): left out
    assert saved is not None and (saved.tasks, saved.wins, saved.losses) == (3, 3, 0)
    assert saved.mean == pytest.approx((0.1 + 0.1 + 0.05) / 3) and saved.verdict == "better"
    assert compare_bits_per_byte(new, old).verdict == "worse"
    assert compare_bits_per_byte({"bits_per_byte": 1.2}, new) is None  # a report from before per-file numbers
    assert compare_bits_per_byte(old, {"bits_per_byte_files": {"e.py": [1.0, 1]}}) is None  # no file in common


def test_eval_keeps_bits_per_byte_per_file_and_compare_pairs_them(tiny_model_dir, tmp_path, capsys):
    report = evaluate(Engine.from_folder(tiny_model_dir), "line", bpb_tokens=600)
    files = report["bits_per_byte_files"]
    assert len(files) == len(report["heldout_files"]) and all(bits > 0 and n > 0 for bits, n in files.values())
    total = sum(bits for bits, _ in files.values()) / sum(n for _, n in files.values())
    assert report["bits_per_byte"] == pytest.approx(total, abs=1e-4)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    assert main(["report", "compare", str(path), str(path), "--json", str(tmp_path / "c.json")]) == 0
    assert f"({len(files)} files): +0.0000 [+0.0000, +0.0000] 0 up/0 down same" in capsys.readouterr().out
    saved = json.loads((tmp_path / "c.json").read_text())["bits_per_byte"]
    assert saved["old"] == saved["new"] == report["bits_per_byte"] and saved["saved_per_file"]["tasks"] == len(files)


def test_merged_kinds_equal_one_run_of_both(reports):
    merged = merge_reports([reports["line"], reports["block"]], model="tiny merged")
    assert list(merged["kinds"]) == ["line", "block"] and merged["model"] == "tiny merged"
    assert merged["task_names"] == reports["both"]["task_names"]
    rows = compare_reports(reports["both"], merged)
    assert {(r.kind, r.config) for r in rows} == {
        (kind, row["config"]) for kind, kind_rows in reports["both"]["kinds"].items() for row in kind_rows
    }
    for r in rows:  # the same model on the same tasks: not a single task moved
        for d in (r.exact_match, r.edit_similarity):
            assert (d.mean, d.wins, d.losses, d.verdict) == (0.0, 0, 0, "same")
        assert r.tokens_per_forward[0] == r.tokens_per_forward[1]
    with pytest.raises(ReportMismatch, match="more than one report"):
        merge_reports([reports["line"], reports["both"]])


def test_compare_sees_a_better_model_and_refuses_other_tasks(reports):
    old = reports["line"]
    new = copy.deepcopy(old)
    for row in new["kinds"]["line"]:
        row["task_scores"]["edit_similarity"] = [min(1.0, s + 0.2) for s in row["task_scores"]["edit_similarity"]]
    rows = compare_reports(old, new)
    assert rows and all(r.edit_similarity.wins > 0 and r.edit_similarity.losses == 0 for r in rows)
    assert all(r.edit_similarity.mean > 0 for r in rows)
    with pytest.raises(ReportMismatch, match="different tasks"):
        compare_reports(old, reports["other_tasks"])
    stale = copy.deepcopy(old)
    del stale["task_names"]
    with pytest.raises(ReportMismatch, match="rerun eval"):
        compare_reports(stale, new)


def test_regressions_judge_ar_and_the_served_threshold_only(reports):
    old = reports["both"]
    new = copy.deepcopy(old)
    for kind in ("line", "block"):
        ar, block = new["kinds"][kind]
        assert (ar["config"], block["config"]) == ("ar", "block B=8 t=0.5")
        block["task_scores"]["edit_similarity"] = [s - 0.2 for s in block["task_scores"]["edit_similarity"]]
    assert regressions(old, new, served_config=None).worse == []  # t=0.5 is not served: not judged
    worse = regressions(old, new, served_config="block B=8 t=0.5").worse
    assert [(r.kind, r.config, r.edit_similarity.verdict) for r in worse] == [
        ("line", "block B=8 t=0.5", "worse"),
        ("block", "block B=8 t=0.5", "worse"),
    ]


def test_regressions_count_a_model_that_stutters_more_as_worse(reports):
    old = copy.deepcopy(reports["both"])
    for kind in ("line", "block"):
        for row in old["kinds"][kind]:
            row["task_scores"]["stutter"] = [0] * row["tasks"]
    new = copy.deepcopy(old)
    block = new["kinds"]["line"][1]
    block["task_scores"]["stutter"] = [1] * block["tasks"]  # same scores, but every completion stutters now
    (worse,) = regressions(old, new, served_config="block B=8 t=0.5").worse
    assert (worse.kind, worse.config, worse.stutter_verdict, worse.edit_similarity.verdict) == (
        "line",
        "block B=8 t=0.5",
        "worse",
        "same",
    )
    assert "stutter +100.0% [+100.0, +100.0]" in format_comparison([worse]) and "down worse" in format_comparison(
        [worse]
    )
    # Stuttering less is better, and nothing to refuse; a report from before stutter was counted is not judged on it.
    assert regressions(new, old, served_config="block B=8 t=0.5").worse == []
    for row in new["kinds"]["line"]:
        del row["task_scores"]["stutter"]
    assert regressions(old, new, served_config="block B=8 t=0.5").worse == []


def test_regressions_hold_the_served_configuration_to_the_one_served_before(reports):
    old = reports["both"]
    new = copy.deepcopy(old)
    for kind in ("line", "block"):
        ar, block = new["kinds"][kind]
        block["task_scores"] = copy.deepcopy(ar["task_scores"])  # t=0.5 scores as AR did, task by task
    # The old report's AR row stands in for "the configuration served before".
    assert regressions(old, new, "block B=8 t=0.5", previous_served_config="ar").worse == []
    for kind in ("line", "block"):
        block = new["kinds"][kind][1]
        block["task_scores"]["edit_similarity"] = [s - 0.2 for s in block["task_scores"]["edit_similarity"]]
    worse = regressions(old, new, "block B=8 t=0.5", previous_served_config="ar").worse
    assert [(r.kind, r.config) for r in worse] == [
        ("line", "block B=8 t=0.5 (was ar)"),
        ("block", "block B=8 t=0.5 (was ar)"),
    ]
    assert all(r.edit_similarity.mean == pytest.approx(-0.2) for r in worse)
    # A configuration served before that the old report lacks: named, and AR is still judged.
    for kind in ("line", "block"):
        ar = new["kinds"][kind][0]
        ar["task_scores"]["edit_similarity"] = [s - 0.2 for s in ar["task_scores"]["edit_similarity"]]
    judgement = regressions(old, new, "block B=8 t=0.5", previous_served_config="block B=8 t=0.3")
    assert [(r.kind, r.config) for r in judgement.worse] == [("line", "ar"), ("block", "ar")]
    assert len(judgement.unjudged) == 2
    assert all("the old report has no 'block B=8 t=0.3' row" in u for u in judgement.unjudged)
    # The configuration it would be served with, missing from the new report: that one can be measured, so the
    # reports cannot be judged until it is (a served configuration nobody measured would ship unjudged).
    with pytest.raises(ReportMismatch, match=re.escape("line: the new report has no 'block B=8 t=0.9' row")):
        regressions(old, new, "block B=8 t=0.9", previous_served_config="block B=8 t=0.5")
    without_ar = copy.deepcopy(new)
    without_ar["kinds"]["block"] = without_ar["kinds"]["block"][1:]  # AR is judged too, served or not
    with pytest.raises(ReportMismatch, match=re.escape("block: the new report has no 'ar' row")):
        regressions(old, without_ar, "block B=8 t=0.5")
    # A judged row without per-task scores is not a missing row: the reports cannot be judged at all.
    del new["kinds"]["line"][0]["task_scores"]
    with pytest.raises(ReportMismatch, match="rerun eval"):
        regressions(old, new, "block B=8 t=0.5")


def test_reports_made_differently_or_missing_a_kind_are_not_judged(reports):
    old = reports["both"]
    changes = (
        ("dtype", "bfloat16"),
        ("token_healing", not old["token_healing"]),
        ("heldout_files", ["x"]),
        ("heldout", "wheel files of data/corpus-wheels's validation split"),
        ("task_allocation", "even"),
        ("task_lines", "code lines; literal tables included"),
        ("defer_repeats", True),
    )
    for key, value in changes:
        other = {**copy.deepcopy(old), key: value}
        with pytest.raises(ReportMismatch, match=f"made differently: {key}"):
            regressions(old, other, "block B=8 t=0.5")
        with pytest.raises(ReportMismatch, match="made differently"):
            compare_reports(old, other)
        with pytest.raises(ReportMismatch, match="made differently"):
            merge_reports([reports["line"], {**reports["block"], key: value}])
    # A report from before tasks were shared by square root split them evenly: not comparable either.
    written_before = {k: v for k, v in copy.deepcopy(old).items() if k != "task_allocation"}
    with pytest.raises(ReportMismatch, match="task_allocation 'even' vs 'sqrt'"):
        compare_reports(written_before, old)
    # Nor is one from before literal tables were left out of the line and block tasks.
    with_tables = {k: v for k, v in copy.deepcopy(old).items() if k != "task_lines"}
    with pytest.raises(ReportMismatch, match="task_lines 'code lines; literal tables included' vs 'code lines;"):
        compare_reports(with_tables, old)
    # One from before repeats could be deferred did not defer them: comparable with one that does not.
    written_before = {k: v for k, v in copy.deepcopy(old).items() if k != "defer_repeats"}
    assert compare_reports(written_before, old)
    with pytest.raises(ReportMismatch, match="defer_repeats False vs True"):
        compare_reports(written_before, {**old, "defer_repeats": True})
    # One from before `--heldout-corpus` held stdlib files.
    written_before = {k: v for k, v in copy.deepcopy(old).items() if k != "heldout"}
    assert compare_reports(written_before, {**old, "heldout": "stdlib"})
    with pytest.raises(ReportMismatch, match=r"heldout 'stdlib' vs .wheel files"):
        compare_reports(written_before, {**old, "heldout": "wheel files of c's validation split"})
    with pytest.raises(ReportMismatch, match="one report only"):  # unjudged would have meant not refused
        regressions(old, reports["line"], "block B=8 t=0.5")
    with pytest.raises(ReportMismatch, match="different models"):
        merge_reports([reports["line"], {**reports["block"], "model": "another model"}])


def test_report_command(reports, tmp_path, capsys):
    paths = {}
    for name, report in reports.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(report))
    merged = tmp_path / "merged.json"
    assert main(["report", "merge", str(paths["line"]), str(paths["block"]), "--json", str(merged)]) == 0
    text = merged.read_text()
    assert json.loads(text) == merge_reports([reports["line"], reports["block"]])
    scores = reports["line"]["kinds"]["line"][0]["task_scores"]["edit_similarity"]
    assert f'"edit_similarity": {json.dumps(scores)}' in text  # a task list on one line
    assert main(["report", "compare", str(paths["both"]), str(merged), "--json", str(tmp_path / "c.json")]) == 0
    printed = capsys.readouterr().out
    assert "line ar " in printed and "0 up/0 down same" in printed
    saved = json.loads((tmp_path / "c.json").read_text())
    assert len(saved["rows"]) == 4 and all(r["edit_similarity"]["verdict"] == "same" for r in saved["rows"])
    # Bad input: one clear line and exit status 2.
    (tmp_path / "junk.json").write_text("[1, 2")
    for argv in (
        ["report", "compare", str(tmp_path / "missing.json"), str(merged)],
        ["report", "compare", str(tmp_path / "junk.json"), str(merged)],
        ["report", "compare", str(paths["line"]), str(paths["other_tasks"])],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("parafill: error: ") and err.count("\n") == 1


SHIPPED = Path(__file__).parents[2] / "models" / "default"
SHIPPED_REPORT = Path(__file__).parents[2] / "benchmarks" / "results" / "eval_default_cpu.json"
SHIPPED_WHEEL_REPORT = SHIPPED_REPORT.with_name("eval_wheels_default_cpu.json")


def test_report_thresholds_prints_the_rule_that_chose_the_shipped_models_threshold(tmp_path, capsys):
    # The shipped model's card and third-party reports, tested again by the rule: the threshold it serves with
    # both is config.json's.
    argv = ["report", "thresholds", str(SHIPPED_REPORT), "--also", str(SHIPPED_WHEEL_REPORT), "--by-file", "0.15"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    served = json.loads((SHIPPED / "config.json").read_text())["block_threshold"]
    assert f"served with every report: t={served:g}\n" in printed and "t=0.9: reference" in printed
    assert printed.count("served: t=") == 2 and "the search stopped at" in printed
    # By file: every held-out file with line tasks is listed once, and the tasks add up to the kind's.
    by_file = printed.split("by held-out file\n", 1)[1]
    line_part = by_file.split("\nblock (", 1)[0]
    tasks = [int(m) for m in re.findall(r"\s(\d+) tasks\s", line_part)]
    assert sum(tasks) == len(json.loads(SHIPPED_REPORT.read_text())["task_names"]["line"])
    # Bad input: one clear line and exit status 2, nothing printed on stdout.
    for argv, message in (
        (["report", "thresholds", str(SHIPPED_REPORT), "--by-file", "0.7"], "not among the measured thresholds"),
        (["report", "thresholds", str(SHIPPED_REPORT), "--block-size", "16"], "no block-decoder rows at B=16"),
        (["report", "thresholds", str(SHIPPED_REPORT), "--also", str(tmp_path / "none.json")], "none.json"),
    ):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("parafill: error: ") and message in err and err.count("\n") == 1


ROOT = Path(__file__).parents[2]
RESULTS = ROOT / "benchmarks" / "results"


@pytest.mark.parametrize("compare_path", sorted(RESULTS.glob("compare_*.json")), ids=lambda p: p.stem)
def test_committed_comparisons_name_the_committed_reports_they_were_made_from(compare_path, tmp_path, capsys):
    # A comparison is evidence for a shipping decision: a reader must be able to open both reports and
    # get the same rows again. Paths under runs/ or /tmp, or a report later overwritten, break that.
    stored = json.loads(compare_path.read_text())
    named = [stored[side] for side in ("old", "new")]
    kept = [name for name in named if not (name.startswith("eval of ") and "not kept" in name)]
    for name in kept:  # the others are reports lost before reports were kept, said in words
        assert name.startswith("benchmarks/results/") and (ROOT / name).is_file(), name
    if len(kept) < 2:
        return
    again = tmp_path / "again.json"
    assert main(["report", "compare", *(str(ROOT / name) for name in kept), "--json", str(again)]) == 0
    capsys.readouterr()
    assert json.loads(again.read_text())["rows"] == stored["rows"]


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "models" / "default" / "README.md"]
# A report's file name, bare (`eval_cpu-5m-n_sqrt.json`) or under benchmarks/results/; names under another
# folder (runs/cpu/eval_shipped.json, the output of a command shown) are not committed reports.
REPORT_NAME = re.compile(
    r"(?<![\w/.-])((?:eval|compare)_[\w.-]+\.(?:json|png))|benchmarks/results/([\w.-]+\.(?:json|png))"
)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_reports_the_documents_cite_are_committed(document):
    # The history cites reports as its evidence; a report renamed or deleted since leaves the claim unreadable.
    cited = {bare or under for bare, under in REPORT_NAME.findall(document.read_text())}
    assert cited or document != ROOT / "README.md"  # the README cites the shipped model's report
    missing = sorted(name for name in cited if not (RESULTS / name).is_file())
    assert missing == [], f"{document.relative_to(ROOT)} cites reports that benchmarks/results/ lacks: {missing}"
