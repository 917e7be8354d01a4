"""What an exported model folder says about its training: the totals over every run behind its weights
(`lineage`, `totals`, kept in training.json) and the model card (README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from decoder.model import CausalLM
from decoder.training.curve import CURVE_FILE, curve_points
from decoder.training.objective import CERTAINTY_TEMPERATURE
from decoder.training.tokenizer_train import SPECIAL_IDS


def model_card(model: CausalLM, training: dict[str, Any]) -> str:
    cfg = model.config
    corpus = training.get("corpus", {})
    m = training.get("metrics", {})
    tc = training.get("train_config", {})
    lines = [
        "# parafill default model",
        "",
        "A small Qwen2-architecture code model trained from scratch by parafill's own training pipeline",
        "(`decoder/training`): AR next-token pretraining, then the joint block-diffusion objective",
        "(noisy + clean streams in one forward, masked-token CE + next-token CE), so one set of weights serves",
        "both the block-diffusion inline-completion decoder and the AR explain decoder.",
        "",
        "## Model",
        f"- parameters: {model.num_parameters():,} (tied embeddings)",
        f"- hidden {cfg.hidden_size}, layers {cfg.num_hidden_layers}, heads {cfg.num_attention_heads} "
        f"(kv {cfg.num_key_value_heads}), intermediate {cfg.intermediate_size}, vocab {cfg.vocab_size}",
        f"- mask token id {cfg.mask_token_id}; special tokens ids 0-7: " + ", ".join(f"`{t}`" for t in SPECIAL_IDS),
        "- weights: fp16 safetensors; tokenizer: byte-level BPE (`tokenizer.json`), load it with "
        "`PreTrainedTokenizerFast`, not `AutoTokenizer` (which would pick Qwen2Tokenizer)",
        "",
        "## Training",
        *_tokens_seen_lines(training),
        f"- tokens per stage (this run): {training.get('stage_tokens', {})}; exported in stage "
        f"`{training.get('stage', '?')}`"
        + (" (AR only so far: block-diffusion decoding is untrained)" if training.get("stage") == "ar" else ""),
        *_distill_lines(training),
        *_growth_lines(tc),
        f"- sequence {tc.get('seq_len')}, batch {tc.get('batch_size')}, lr {tc.get('lr')} ({_schedule_words(tc)}), "
        f"AR-only share {tc.get('ar_fraction')}, block sizes {tc.get('block_sizes')}, "
        f"FIM rate {tc.get('fim_rate')} (SPM/PSM), explain rate {tc.get('explain_rate')}",
        "",
        "## Corpus",
        f"- {corpus.get('files', '?')} Python files after exact dedupe "
        f"({corpus.get('duplicates_skipped', '?')} duplicates skipped)",
    ]
    for name, s in corpus.get("sources", {}).items():
        lines.append(f"- source {name}: {s['files']} files, {s['bytes'] / 1e6:.1f} MB")
    if wheels := corpus.get("wheels"):
        lines.append(
            f"- wheels: {wheels['used']} read of {wheels['found']} found (the newest of each project; "
            f"{wheels['older_versions_skipped']} older versions and {wheels['installed_skipped']} wheels of "
            "installed projects skipped)"
        )
    for name, s in corpus.get("splits", {}).items():
        lines.append(f"- split {name}: {s['files']} files, {s['modules']} modules, {s['bytes'] / 1e6:.1f} MB")
    lines += _mix_lines(training)
    lines += ["", "## Metrics (validation split: held-out modules)"]
    for k in ("val_ar_bpb", "val_masked_bpb", "val_ar_loss", "train_tokens_per_s"):
        if k in m:
            lines.append(f"- {k}: {m[k]:.4f}" if isinstance(m[k], float) else f"- {k}: {m[k]}")
    if len(curve_points(training)) >= 2:
        lines += ["", f"![validation bits per byte over training]({CURVE_FILE})"]
    lines += ["", "Full numbers: `training.json`.", ""]
    return "\n".join(lines)


def _mix_lines(training: dict[str, Any]) -> list[str]:
    mix = training.get("mix_corpus")
    if not mix:
        return []
    train = mix.get("corpus_shards", {}).get("train", {})
    sources = mix.get("corpus", {}).get("sources", {})
    listed = ", ".join(f"{name} {s['bytes'] / 1e6:.0f} MB" for name, s in sources.items())
    return [
        f"- mixed in: {mix['rate']:.0%} of the document rows from a second corpus ({train.get('tokens', 0) / 1e6:.1f}M "
        f"train tokens; {listed}; its validation split unused)"
    ]


def _growth_lines(tc: dict[str, Any]) -> list[str]:
    if not tc.get("grow_layers"):
        return []
    return [
        f"- grown to {tc['grow_layers']} layers from the `init_from` model at the start of this run "
        "(`decoder/training/grow.py`: each added layer a copy of the one below with its residual outputs zeroed), "
        f"the added layers trained at {tc.get('grown_lr_scale')}x the learning rate"
    ]


def lineage(init_from: str | None) -> dict[str, Any] | None:
    """The training behind `init_from`'s weights (totals over all earlier runs), from its training.json."""
    if not init_from:
        return None
    path = Path(init_from) / "training.json"
    prior = json.loads(path.read_text()) if path.is_file() else {}
    return {
        "folder": str(init_from),
        "tokens_seen": prior.get("tokens_seen_total", prior.get("tokens_seen")),
        "train_minutes": prior.get("train_minutes_total", prior.get("train_minutes")),
        "runs": prior.get("runs_total", 1 if prior else None),
        "history": curve_points(prior),
    }


def totals(training: dict[str, Any], lineage: dict[str, Any] | None) -> dict[str, Any]:
    """This run's numbers added to its lineage's: what the exported weights have seen in all."""
    if not lineage:
        return {}
    init = {k: v for k, v in lineage.items() if k != "history"}
    if lineage.get("tokens_seen") is None:  # weights of unknown training: no totals to give
        return {"init": init}
    runs = (lineage.get("runs") or 1) + 1
    this_run = [p | {"tokens": lineage["tokens_seen"] + p["tokens"], "run": runs} for p in training.get("history", [])]
    return {
        "init": init,
        "history_total": lineage.get("history", []) + this_run,
        "tokens_seen_total": lineage["tokens_seen"] + training["tokens_seen"],
        "train_minutes_total": round((lineage.get("train_minutes") or 0.0) + training["train_minutes"], 1),
        "runs_total": runs,
    }


def _tokens_seen_lines(training: dict[str, Any]) -> list[str]:
    this_run = (
        f"{training['tokens_seen']:,} in {training['steps']:,} steps, {training['train_minutes']} minutes "
        f"on {training['hardware']}"
    )
    if "tokens_seen_total" not in training:
        return [f"- tokens seen: {this_run}"]
    return [
        f"- tokens seen: {training['tokens_seen_total']:,} in all, over {training['runs_total']} runs "
        f"({training['train_minutes_total']} minutes)",
        f"- this run: {this_run}, starting from the weights in `{training['init']['folder']}`",
    ]


def _distill_lines(training: dict[str, Any]) -> list[str]:
    distilled = training.get("stage_tokens", {}).get("distill")
    if not distilled:
        return []
    tc = training.get("train_config", {})
    lines = [
        f"- self-distillation (this run): {distilled:,} tokens of joint-stage batches were training prompts followed "
        f"by a model's own greedy continuation (`{tc.get('distill_set')}`, share {tc.get('distill_rate')}; "
        "`parafill distill-set`), so that block steps can commit several tokens where greedy decoding is predictable"
    ]
    if tc.get("certainty_weight"):
        lines.append(
            f"- certainty forcing on those batches: weight {tc['certainty_weight']} on the entropy (temperature "
            f"{CERTAINTY_TEMPERATURE}) of the masked predictions that were right (after dParallel)"
        )
    return lines


def _schedule_words(tc: dict[str, Any]) -> str:
    """The learning-rate schedule in words, read from the run's config (older configs name none: cosine)."""
    warmup = tc.get("warmup_steps")
    warmup_words = f"{warmup} warmup steps" if warmup is not None else "warmup"
    if tc.get("schedule") == "wsd":
        fraction = tc.get("decay_fraction")
        decay = f"the last {fraction:.0%} of the run" if fraction is not None else "the end of the run"
        return f"{warmup_words}, stable, cosine decay over {decay}"
    return f"{warmup_words}, then cosine"
