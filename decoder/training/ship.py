"""Copy an exported model folder into the repository's shipped default (models/default).

Only inference files travel: config.json, model.safetensors (fp16), tokenizer files, the model card and
training.json, plus heldout.json (the corpus's validation files, which the model never saw: the GPU recipe
keeps them out of its own corpus; `parafill eval` picks its held-out standard-library files by module name).
No optimizer state, no checkpoint. With `--eval` the card gets its evaluation section from `parafill eval
--json` reports (decoder/evaluation/card.py), and config.json the block-decoding threshold the reports
support (`block_threshold`, decoder/evaluation/threshold_choice.py: the stdlib report's choice, and with
`--wheel-eval` no lower than the third-party report's): the threshold the server decodes with unless a user
sets one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from decoder.config import ModelConfig
from decoder.evaluation.card import eval_section
from decoder.evaluation.reports import ReportMismatch, format_comparison, regressions
from decoder.evaluation.threshold_choice import ThresholdChoice, strictest_choice, threshold_tests
from decoder.evaluation.threshold_report import format_threshold_tests
from decoder.families import THRESHOLD_FIELD, family_of
from decoder.generation import decoder_label
from decoder.training.corpus import heldout_entries
from decoder.training.validation import DEFAULT_WINDOWS, side_by_side, side_by_side_section

# The working tree, shipped model included, travels to the GPU machine on every device call, which takes at
# most 64 MiB: a model over about 45 MB would leave no room for the rest. The GPU recipe's 20m model is 38 MB
# in fp16 (its larger sizes are refused there for the same reason).
MAX_MODEL_MB = 45.0

SHIPPED = (
    *("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"),
    *("README.md", "training.json", "training_curve.png"),
)


def check_size(export_dir: str | Path, max_mb: float = MAX_MODEL_MB) -> None:
    """Refuse weights too large for the repository (ValueError)."""
    weights = Path(export_dir) / "model.safetensors"
    size = weights.stat().st_size / 1e6
    if size > max_mb:
        raise ValueError(f"{weights} is {size:.1f} MB, over the {max_mb} MB limit for the repo")


def ship(
    export_dir: str | Path,
    dest: str | Path,
    corpus_dir: str | Path | None = None,
    evaluation: str | None = None,
    threshold: float | None = None,
) -> Path:
    """Copy the export into `dest`; `evaluation`: a markdown section appended to the card; `threshold`: the
    block-decoding threshold written into config.json (None: the family's stays the default). The caller checks
    the weights' size first (check_size)."""
    src, dest = Path(export_dir), Path(dest)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in SHIPPED:
        if (src / name).is_file():
            shutil.copy2(src / name, tmp / name)
    if corpus_dir is not None:
        entries = [
            {k: e[k] for k in ("source", "path", "module", "sha256", "bytes")} for e in heldout_entries(corpus_dir)
        ]
        (tmp / "heldout.json").write_text(json.dumps({"split": "val", "files": entries}, indent=1) + "\n")
    elif (dest / "heldout.json").is_file():
        shutil.copy2(dest / "heldout.json", tmp / "heldout.json")
    if threshold is not None:
        config = json.loads((tmp / "config.json").read_text(encoding="utf-8"))
        config[THRESHOLD_FIELD] = threshold
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if evaluation:
        card = tmp / "README.md"
        card.write_text(card.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + evaluation, encoding="utf-8")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


def served_block_size(export_dir: str | Path) -> int:
    """The block size this model's family decodes with: the block rows the served threshold is chosen from."""
    config = ModelConfig.from_folder(export_dir)
    return family_of(config).block_size_for(config.extra)


def served_config(model_dir: str | Path) -> str | None:
    """The block configuration a model folder is served with (its eval report's row label); None: no model."""
    if not (Path(model_dir) / "config.json").is_file():
        return None
    config = ModelConfig.from_folder(model_dir)
    family = family_of(config)
    return decoder_label("block", family.block_size_for(config.extra), family.threshold_for(config.extra))


def refuse_regressions(
    previous: dict, report: dict, choice: ThresholdChoice | None, previous_config: str | None = None
) -> None:
    """Exit (status 1) when the new model is worse than the shipped one on the rows users get: AR, and the
    new served block configuration against `previous_config` (the one served so far), on completion tasks.
    Reports that cannot be paired (other tasks, no per-task scores, a judged row missing from the new report)
    exit too: nothing shows the new model is not worse. The configuration served before missing from the old
    report gives a warning."""
    try:
        judgement = regressions(previous, report, None if choice is None else choice.config, previous_config)
    except ReportMismatch as exc:
        raise SystemExit(
            f"ship: cannot compare with the previous report task by task ({exc}); measure both models with the "
            "same eval command, or ship anyway with --allow-worse"
        ) from exc
    for reason in judgement.unjudged:
        print(f"ship: not judged: {reason}", file=sys.stderr)
    if judgement.worse:
        print(format_comparison(judgement.worse), file=sys.stderr)
        raise SystemExit("ship: the new model is worse than the one it replaces on the rows above (--allow-worse)")


def wheel_section(
    report: dict,
    previous: dict,
    choice: ThresholdChoice | None,
    previous_config: str | None,
    command: str = "parafill eval --heldout-corpus",
    judge: bool = True,
) -> str:
    """The card's section for a second held-out set (third-party code), after judging it like the first: a model
    that is better on the stdlib files but worse on other projects' code is not shipped either."""
    if judge:
        refuse_regressions(previous, report, choice, previous_config)
    return eval_section(report, previous, command)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("export_dir")
    p.add_argument("--dest", default="models/default")
    p.add_argument("--corpus", default=None, help="corpus folder whose validation split goes into heldout.json")
    p.add_argument("--eval", help="`parafill eval --json` report of this model: the card's evaluation section")
    p.add_argument("--previous-eval", help="the same for the model it replaces (shown in brackets)")
    p.add_argument("--eval-command", default="parafill eval", help="the command that made the reports")
    p.add_argument("--eval-note", default="", help="a sentence on how it was measured (machine, load)")
    p.add_argument(
        "--wheel-eval",
        nargs=2,
        metavar=("NEW", "OLD"),
        help="`parafill eval --heldout-corpus` reports of this model and the one it replaces (third-party code): "
        "judged like --eval, and a second evaluation section of the card",
    )
    p.add_argument("--wheel-eval-command", default="parafill eval --heldout-corpus", help="the command that made them")
    p.add_argument(
        "--validation-corpus",
        action="append",
        default=[],
        metavar="DIR",
        help="score the model in --dest and this one on DIR's validation windows, side by side, for the card "
        "(repeatable)",
    )
    p.add_argument("--validation-windows", type=int, default=DEFAULT_WINDOWS, help="windows a corpus (default 256)")
    p.add_argument("--max-mb", type=float, default=MAX_MODEL_MB, help="refuse weights larger than this (MB)")
    p.add_argument(
        "--allow-worse",
        action="store_true",
        help="ship even when the reports show the new model worse, task by task, than the one it replaces",
    )
    a = p.parse_args()
    try:  # before the minutes of scoring below, not after them
        check_size(a.export_dir, a.max_mb)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"ship: {exc}") from None
    section, choice = None, None
    if a.eval:
        report = json.loads(Path(a.eval).read_text())
        previous = json.loads(Path(a.previous_eval).read_text()) if a.previous_eval else None
        wheel_reports = [json.loads(Path(path).read_text()) for path in a.wheel_eval or []]  # NEW, OLD
        # The served threshold must hold on the third-party files too: a user's code is not the standard library.
        tested = [(a.eval, report)] + ([(a.wheel_eval[0], wheel_reports[0])] if wheel_reports else [])
        block_size = served_block_size(a.export_dir)
        choice = strictest_choice([measured for _, measured in tested], block_size)
        for path, measured in tested:  # what the rule tested, as `parafill report thresholds` prints it
            if threshold_tests(measured, block_size):
                print(f"{path}:\n{format_threshold_tests(measured, block_size)}", file=sys.stderr)
        if not a.allow_worse:
            if choice is None:
                raise SystemExit(
                    "ship: the report has no block rows to choose the served threshold from (--allow-worse)"
                )
            if previous is None and served_config(a.dest) is not None:
                raise SystemExit(
                    f"ship: --previous-eval is needed to judge against the model in {a.dest} (--allow-worse)"
                )
            if previous is not None:
                refuse_regressions(previous, report, choice, served_config(a.dest))
        section = eval_section(report, previous, a.eval_command, a.eval_note, choice)
        if wheel_reports:
            section += "\n" + wheel_section(
                *wheel_reports, choice, served_config(a.dest), a.wheel_eval_command, judge=not a.allow_worse
            )
    elif a.wheel_eval:
        raise SystemExit("ship: --wheel-eval goes with --eval (the served threshold is chosen on the stdlib report)")
    if a.validation_corpus:
        if not (Path(a.dest) / "model.safetensors").is_file():
            raise SystemExit(f"ship: --validation-corpus compares with the model in {a.dest}, and there is none")
        rows = [side_by_side(a.dest, a.export_dir, corpus, a.validation_windows) for corpus in a.validation_corpus]
        section = (section + "\n" if section else "") + side_by_side_section(rows)
    threshold = None if choice is None else choice.threshold
    try:
        print(ship(a.export_dir, a.dest, a.corpus, evaluation=section, threshold=threshold))
    except ValueError as exc:
        raise SystemExit(f"ship: {exc}") from None
