"""Shipping an export: inference files only, the card's evaluation section written from eval reports."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

from decoder.checkpoint import load_model
from decoder.engine import Engine
from decoder.engines import family_params
from decoder.evaluation.cli import add_eval_arguments, run_eval
from decoder.evaluation.metrics import gate_value
from decoder.evaluation.threshold_choice import choose_threshold
from decoder.training.ship import served_config
from decoder.training.trainer import Trainer
from decoder.training.validation import validation_scores
from tests.training.test_train import tiny_cfg

REPO = Path(__file__).resolve().parents[2]


def _export_and_report(tiny_corpus: Path, tmp_path: Path) -> tuple[Path, Path, dict]:
    """A tiny model trained for 3 steps, and its `parafill eval` report (2 tasks a kind, t=0.9 and 0.3)."""
    export = tmp_path / "export"
    Trainer(tiny_cfg(tiny_corpus, tmp_path / "run", max_steps=3, export_dir=str(export))).fit()
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    report_path = tmp_path / "eval.json"
    argv = ["--limit", "2", "--thresholds", "0.9,0.3", "--bpb-tokens", "300", "--json", str(report_path)]
    report = run_eval(parser.parse_args(argv), Engine.from_folder(export), str(export))
    return export, report_path, report


def test_ship_copies_inference_files_and_writes_the_eval_table(tiny_corpus: Path, tmp_path: Path) -> None:
    export, report_path, report = _export_and_report(tiny_corpus, tmp_path)
    previous = json.loads(report_path.read_text())
    previous["bits_per_byte"] = 9.8765
    # the previous model spent half as many bits again on every held-out file
    previous["bits_per_byte_files"] = {
        name: [bits * 1.5, n] for name, (bits, n) in report["bits_per_byte_files"].items()
    }
    (tmp_path / "previous.json").write_text(json.dumps(previous))

    dest = tmp_path / "models" / "default"
    cmd = [sys.executable, "-m", "decoder.training.ship", str(export), "--dest", str(dest), "--eval", str(report_path)]
    # A previous model that scored higher on every rest-of-line task with AR: shipping would be a regression.
    better = json.loads(report_path.read_text())
    ar_scores = better["kinds"]["line"][0]["task_scores"]
    ar_scores["edit_similarity"] = [min(1.0, x + 0.3) for x in ar_scores["edit_similarity"]]
    (tmp_path / "better.json").write_text(json.dumps(better))
    refused = subprocess.run([*cmd, "--previous-eval", str(tmp_path / "better.json")], cwd=REPO, capture_output=True)
    assert refused.returncode == 1 and not dest.exists()
    assert "worse than the one it replaces" in refused.stderr.decode() and " line ar " in refused.stderr.decode()
    # Reports of other tasks cannot be paired: nothing shows the new model is not worse, so it is refused too.
    other = json.loads(report_path.read_text())
    other["task_names"]["line"] = [f"elsewhere.py:{i}" for i in range(len(other["task_names"]["line"]))]
    (tmp_path / "other.json").write_text(json.dumps(other))
    unpaired = subprocess.run([*cmd, "--previous-eval", str(tmp_path / "other.json")], cwd=REPO, capture_output=True)
    assert unpaired.returncode == 1 and not dest.exists() and "cannot compare" in unpaired.stderr.decode()
    too_big = subprocess.run([*cmd, "--max-mb", "0.001"], cwd=REPO, capture_output=True)
    assert too_big.returncode == 1 and not dest.exists() and "MB limit" in too_big.stderr.decode()
    cmd += ["--previous-eval", str(tmp_path / "previous.json"), "--eval-command", "parafill eval --limit 2"]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
    # Over a shipped model, a new one is judged against it or not shipped at all.
    unjudged = subprocess.run(cmd[: cmd.index("--previous-eval")], cwd=REPO, capture_output=True)
    assert unjudged.returncode == 1 and "--previous-eval is needed" in unjudged.stderr.decode()

    assert not any("optimizer" in p.name or "checkpoint" in p.name for p in dest.iterdir())
    for name, tensor in load_model(dest).state_dict().items():
        assert torch.equal(tensor, load_model(export).state_dict()[name])
    card = (dest / "README.md").read_text()
    assert card.startswith((export / "README.md").read_text().rstrip("\n"))
    assert "## Evaluation (`parafill eval --limit 2`)" in card
    line_ar = report["kinds"]["line"][0]
    es, se = f"{line_ar['edit_similarity']:.3f}", f"{line_ar['edit_similarity_se']:.3f}"
    assert f"| rest of line ({line_ar['tasks']}) | ar | " in card and f"{es} ± {se} ({es})" in card  # previous: ()
    assert f"({report['kinds']['explain'][0]['tasks']}) | ar |" in card
    tpf = f"{line_ar['tokens_per_forward']:.2f}"
    assert f"| {tpf} ({tpf}) |" in card  # tokens per forward, the replaced model's in brackets
    assert "| AR-ness (leftmost) | stutter | p50 |" in card
    stutter = f"{line_ar['stutter_rate'] * 100:.1f}%"
    assert f"| - | {stutter} | {line_ar['latency_ms_p50']:.0f} ms |" in card  # AR rows have no AR-ness
    gate = report["kinds"]["line"][1]["confidence_coverage"][1]  # block t=0.9, the surest 75%
    assert "Confidence gate (`minConfidence`), rest of line, block B=8 t=0.9: keeps 75% at >= " in card
    assert f"75% at >= {gate_value(gate['min_confidence'], 2):.2f} (ES {gate['edit_similarity']:.3f}" in card
    bpb_line = next(line for line in card.splitlines() if line.startswith("Held-out bits per byte"))
    assert bpb_line.startswith(f"Held-out bits per byte {report['bits_per_byte']:.4f} (previous: 9.8765; saved file")
    assert bpb_line.endswith("], better).")
    # Same tasks, same model: task by task, no difference anywhere.
    assert "ES against the previous model, task by task" in card and "line ar +0.000 [+0.000, +0.000] same" in card
    # The served threshold is the report's choice, written into config.json, and the engine decodes with it.
    choice = choose_threshold(report, 8)
    assert choice is not None and choice.threshold in (0.9, 0.3)
    assert json.loads((dest / "config.json").read_text())["block_threshold"] == choice.threshold
    assert f"Served threshold: **{choice.threshold:g}** (config.json `block_threshold`" in card
    assert family_params(Engine.from_folder(dest)).threshold == choice.threshold
    # The next ship holds its served configuration to this one (what users got so far).
    assert served_config(dest) == choice.config and served_config(tmp_path / "nothing") is None
    assert family_params(Engine.from_folder(export)).threshold == 0.9  # no measured threshold: the family's


def test_a_second_heldout_set_is_judged_too_and_gets_its_own_card_section(tiny_corpus: Path, tmp_path: Path) -> None:
    export, report_path, _ = _export_and_report(tiny_corpus, tmp_path)
    # The same tasks as scored on third-party files (`parafill eval --heldout-corpus`): its report names them so.
    wheel = json.loads(report_path.read_text()) | {"heldout": "wheel files of data/w's validation split"}
    (tmp_path / "wheel.json").write_text(json.dumps(wheel))
    better = json.loads(json.dumps(wheel))
    block_row = next(r for r in better["kinds"]["block"] if r["mode"] == "ar")
    block_row["task_scores"]["edit_similarity"] = [
        min(1.0, x + 0.3) for x in block_row["task_scores"]["edit_similarity"]
    ]
    (tmp_path / "wheel_better.json").write_text(json.dumps(better))
    dest = tmp_path / "models" / "default"
    cmd = [sys.executable, "-m", "decoder.training.ship", str(export), "--dest", str(dest)]
    cmd += ["--eval", str(report_path), "--previous-eval", str(report_path), "--wheel-eval-command", "pe --wheels"]
    # As good on the stdlib tasks, worse on other projects' code than the model it replaces: not shipped.
    refused = subprocess.run(
        [*cmd, "--wheel-eval", str(tmp_path / "wheel.json"), str(tmp_path / "wheel_better.json")],
        cwd=REPO,
        capture_output=True,
    )
    assert refused.returncode == 1 and not dest.exists()
    assert "worse than the one it replaces" in refused.stderr.decode() and " block ar " in refused.stderr.decode()
    wheel_pair = [str(tmp_path / "wheel.json")] * 2
    subprocess.run([*cmd, "--wheel-eval", *wheel_pair], cwd=REPO, check=True, capture_output=True)
    card = (dest / "README.md").read_text()
    assert "## Evaluation (`parafill eval`)\nHeld-out standard-library files" in card
    third_party = card[card.index("## Evaluation, third-party code (`pe --wheels`)") :]
    files = len(wheel["heldout_files"])
    assert (
        f"Held-out third-party files: wheel files of data/w's validation split, one file a wheel ({files} files)."
        in third_party
    )
    assert "| rest of line (" in third_party and "line ar +0.000 [+0.000, +0.000] same" in third_party
    alone = subprocess.run([*cmd[:6], "--wheel-eval", *wheel_pair], cwd=REPO, capture_output=True)
    assert alone.returncode == 1 and "--wheel-eval goes with --eval" in alone.stderr.decode()


def _as_good_at(report: dict, fast: float, strict: float = 0.9, missing: bool = False) -> dict:
    """`report` with its block rows at threshold `fast` scoring what those at `strict` do, half a token more per
    forward; with `missing`, none of their completions shares a character with the target instead."""
    out = json.loads(json.dumps(report))
    for rows in out["kinds"].values():
        blocks = {r["threshold"]: r for r in rows if r["mode"] == "block" and not r.get("lookup_tokens")}
        if fast in blocks and strict in blocks:
            ref, row = blocks[strict], blocks[fast]
            for key in ("edit_similarity", "exact_match", "stutter_rate", "task_scores"):
                row[key] = json.loads(json.dumps(ref[key]))
            row["tokens_per_forward"] = ref["tokens_per_forward"] + 0.5
            if missing:
                scores = row["task_scores"]["edit_similarity"]
                row["edit_similarity"], row["task_scores"]["edit_similarity"] = 0.0, [0.0] * len(scores)
    return out


def test_the_served_threshold_must_hold_on_the_third_party_files_too(tiny_corpus: Path, tmp_path: Path) -> None:
    export, _, report = _export_and_report(tiny_corpus, tmp_path)
    stdlib, wheels = tmp_path / "stdlib.json", tmp_path / "wheels.json"
    stdlib.write_text(json.dumps(_as_good_at(report, 0.3)))  # t=0.3 holds on the stdlib files
    wheels.write_text(json.dumps(_as_good_at(report, 0.3, missing=True) | {"heldout": "wheel files"}))
    dest = tmp_path / "models" / "default"
    cmd = [sys.executable, "-m", "decoder.training.ship", str(export), "--dest", str(dest), "--eval", str(stdlib)]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
    assert json.loads((dest / "config.json").read_text())["block_threshold"] == 0.3
    shipped = subprocess.run(
        [*cmd, "--previous-eval", str(stdlib), "--wheel-eval", str(wheels), str(wheels)],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    )
    assert json.loads((dest / "config.json").read_text())["block_threshold"] == 0.9
    assert "no lower than t=0.9" in (dest / "README.md").read_text()
    assert shipped.stderr.count("served: t=") == 2  # both reports' tests, as `parafill report thresholds` prints


def test_ship_scores_the_replaced_model_and_the_new_one_side_by_side(tiny_corpus: Path, tmp_path: Path) -> None:
    briefly, longer = tmp_path / "briefly", tmp_path / "longer"
    Trainer(tiny_cfg(tiny_corpus, tmp_path / "a", max_steps=2, export_dir=str(briefly))).fit()
    Trainer(tiny_cfg(tiny_corpus, tmp_path / "b", max_steps=12, export_dir=str(longer))).fit()
    dest = tmp_path / "models" / "default"
    ship = [sys.executable, "-m", "decoder.training.ship"]
    compare = ["--validation-corpus", str(tiny_corpus), "--validation-windows", "4"]
    # Nothing shipped yet: nothing to compare with, and nothing is written.
    refused = subprocess.run([*ship, str(briefly), "--dest", str(dest), *compare], cwd=REPO, capture_output=True)
    assert refused.returncode == 1 and "there is none" in refused.stderr.decode() and not dest.exists()
    # Weights too large for the repo are refused before any scoring (here, of a corpus that is not there).
    missing = ["--validation-corpus", str(tmp_path / "no-corpus"), "--max-mb", "0.001"]
    too_big = subprocess.run([*ship, str(briefly), "--dest", str(dest), *missing], cwd=REPO, capture_output=True)
    assert too_big.returncode == 1 and "MB limit" in too_big.stderr.decode() and not dest.exists()
    subprocess.run([*ship, str(briefly), "--dest", str(dest)], cwd=REPO, check=True, capture_output=True)
    subprocess.run([*ship, str(longer), "--dest", str(dest), *compare], cwd=REPO, check=True, capture_output=True)

    card = (dest / "README.md").read_text()
    assert "## Validation side by side" in card
    row = next(line for line in card.splitlines() if line.startswith(f"| `{tiny_corpus}` |"))
    windows, ar, masked = (cell.strip() for cell in row.strip("|").split("|")[1:])
    (old_ar, new_ar), (old_masked, new_masked) = (map(float, cell.split(" -> ")) for cell in (ar, masked))
    # The numbers are the two models' own, scored alone on the same windows (to the card's 4 decimals).
    for model, (want_ar, want_masked) in ((briefly, (old_ar, old_masked)), (longer, (new_ar, new_masked))):
        scores, scored = validation_scores(model, tiny_corpus, 4)
        assert int(windows) == scored
        assert abs(scores["val_ar_bpb"] - want_ar) < 1e-3 and abs(scores["val_masked_bpb"] - want_masked) < 1e-3
    assert new_ar < old_ar  # 12 steps learn more than 2
