"""`parafill bench` on the tiny random model: fits, span runners, cache section, plots, the CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decoder.bench.cache import cache_cold_warm, random_weight_engine
from decoder.bench.prompts import context_prompt, fim_prompts, long_code
from decoder.bench.spans import EngineSpanRunner, measure_spans, ratios, summarise_spans
from decoder.bench.stats import loglog_fit, percentile
from decoder.engine import EngineOptions
from decoder.engines import family_params, open_family_engine
from decoder.machine import cpu_name

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return open_family_engine(tiny_model_dir, EngineOptions(threads=1))


def test_loglog_fit_recovers_exponents():
    xs = [8, 16, 32, 64, 128]
    fit = loglog_fit(xs, [3.0 * x**0.5 for x in xs])
    assert fit.exponent == pytest.approx(0.5) and fit.coefficient == pytest.approx(3.0) and fit.r2 == pytest.approx(1)
    assert loglog_fit(xs, [2.0 * x for x in xs]).exponent == pytest.approx(1.0)
    assert math.isnan(loglog_fit([8], [1.0]).exponent)
    assert percentile([1, 2, 3, 4], 0.5) == 2.5 and percentile([5], 0.99) == 5


def test_span_runners_decode_exactly_the_span_and_ar_agrees_with_block_of_one(engine):
    prompts = fim_prompts(engine.tokenizer, 2)
    assert len(prompts) == 2 and all(p.ids for p in prompts)
    base = family_params(engine)
    runners = [
        EngineSpanRunner(engine, "ar", base),
        EngineSpanRunner(engine, "block", base),
        EngineSpanRunner(engine, "block", family_params(engine, block_size=1, threshold=1.0), name="block1"),
    ]
    samples = measure_spans(runners, prompts, [4, 8])
    assert len(samples) == 2 * 2 * 3
    for s in samples:
        assert s.tokens == s.span and s.prefill_ms > 0 and s.decode_ms > 0 and s.cached_prompt_tokens == 0
    for s in (s for s in samples if s.runner == "ar"):
        assert s.decode_passes == s.span - 1
    by = {(s.runner, s.prompt, s.span): s.token_ids for s in samples}
    for p in prompts:  # a block of one, one token per step, is AR
        assert by[("block1", p.name, 8)] == by[("ar", p.name, 8)]
    summary = summarise_spans(samples)
    assert set(summary) == {"ar", runners[1].name, "block1"}
    assert [r["span"] for r in summary["ar"]["rows"]] == [4, 8]
    assert summary["ar"]["rows"][0]["tokens_per_decode_pass"] == 1.0
    assert not math.isnan(summary["ar"]["fit_decode"]["exponent"])
    assert ratios(summary, "ar")["ar"] == {4: 1.0, 8: 1.0}


def test_cache_warm_request_reuses_all_but_the_tail(engine):
    code = long_code()
    typed = context_prompt(engine.tokenizer, code, 256, typed="x")
    base = context_prompt(engine.tokenizer, code, 256)
    assert len(base.ids) == 256 and typed.ids[:200] == base.ids[:200]
    out = cache_cold_warm(engine, code, [128, 256, 4096], family_params(engine), span=4, repeats=1)
    assert [r["target"] for r in out["rows"]] == [128, 256]
    assert out["skipped"][0]["target"] == 4096 and "max_position_embeddings" in out["skipped"][0]["reason"]
    for row in out["rows"]:
        assert row["warm_cached_prompt_tokens"] >= row["warm_prompt_tokens"] - 32 > 0
    big = random_weight_engine(engine, 8192)
    assert big.model.config.max_position_embeddings == 8192 and big.model.config.hidden_size == 64
    assert cache_cold_warm(big, code, [1024], family_params(big), span=4, repeats=1)["rows"][0]["target"] == 1024


def test_cli_quick_run_writes_report_and_plots(tiny_model_dir, tmp_path):
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "lsp_server.cli", "bench", "--model", str(tiny_model_dir), "--quick"]
    cmd += ["--sections", "spans,threshold,cache", "--llamacpp", "off", "--no-progress"]
    cmd += ["--json", str(out), "--plots", str(tmp_path / "png")]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["sections"] == ["spans", "threshold", "cache"]
    spans = report["spans"]["threads"]["1"]["summary"]
    assert "ar" in spans and any(name.startswith("block") for name in spans)
    assert {"exponent", "r2"} <= set(spans["ar"]["fit_decode"])
    kinds = report["threshold"]["kinds"]
    assert [r["mode"] for r in kinds["line"]] == ["ar", "block", "block"]
    assert report["cache"]["model"]["rows"] and report["model"]["weights_sha256"]
    assert report["machine"]["cpu"] == cpu_name() and report["machine"]["cpus"] == os.cpu_count()
    assert "latency vs span" in proc.stdout and "exponent" in proc.stdout
    for name in ("span_latency.png", "threshold.png", "prefix_cache.png"):
        assert (tmp_path / "png" / name).stat().st_size > 1000
    replot = [sys.executable, "-m", "lsp_server.cli", "bench", "--replot", str(out), "--plots", str(tmp_path / "again")]
    assert subprocess.run(replot, cwd=REPO, capture_output=True, timeout=120).returncode == 0
    assert (tmp_path / "again" / "span_latency.png").is_file()


def test_cli_rejects_unknown_sections(tiny_model_dir):
    proc = subprocess.run(
        [sys.executable, "-m", "lsp_server.cli", "bench", "--model", str(tiny_model_dir), "--sections", "nope"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "unknown sections" in proc.stderr
