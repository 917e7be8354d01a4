"""`parafill bench`: latency vs span (block diffusion, AR, llama.cpp), tokens per forward and quality vs
threshold, prefix cache cold vs warm, and inline latency through the LSP path (idle / during an explain).

The engine-level sections are in decoder/bench; the LSP section drives a real `parafill serve` process with
the client of benchmarks/lsp_latency.py (present in a source checkout). llama.cpp joins the span section
when llama-cpp-python is installed (benchmarks/llamacpp/install.sh) or GGUF files are given.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from decoder.defaults import REPO_ROOT, default_model_dir
from lsp_server.cmd_generate import add_model_arguments
from lsp_server.cmd_paths import check_output_file, check_output_folder, read_json_file
from lsp_server.errors import UserError

QUICK = {
    "spans": "8,16,32",
    "prompts": 2,
    "threads": "1",
    "thresholds": "0.9,0.5",
    "tasks": 4,
    "contexts": "128,256",
    "cache_repeats": 1,
    "random_positions": 1024,
    "lsp_positions": 2,
}


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{flag} takes comma-separated whole numbers; got {text!r}") from None


def _floats(text: str, flag: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{flag} takes comma-separated numbers; got {text!r}") from None


def _read_report(path: Path) -> dict[str, Any]:
    report = read_json_file(path, "report")
    if not isinstance(report, dict) or not isinstance(report.get("model"), dict):
        raise UserError(f"--replot {path} is not a `parafill bench` report (no 'model')")
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--sections", default="spans,threshold,cache,lsp", help="which sections to run")
    g = parser.add_argument_group("latency vs span")
    g.add_argument("--spans", default="8,16,32,64,128", help="span lengths in tokens")
    g.add_argument("--prompts", type=int, default=4, help="held-out FIM prompts")
    g.add_argument("--repeats", type=int, default=1, help="passes over prompts x spans")
    g.add_argument("--threads", default="1,2", help="CPU thread counts (the first is used by the other sections)")
    g.add_argument("--block-size", type=int, default=None, help="default: the model family's")
    g.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="block runner's threshold (default: the model's measured one, else its family's)",
    )
    g.add_argument("--span-thresholds", default="", help="more block runners at these thresholds")
    g.add_argument(
        "--llamacpp",
        choices=("auto", "off"),
        default="auto",
        help="auto: if llama-cpp-python is installed, convert the model to GGUF (f32, f16) and time it too",
    )
    g.add_argument("--gguf", action="append", default=[], type=Path, help="time this GGUF file with llama.cpp")
    g = parser.add_argument_group("quality vs threshold")
    g.add_argument("--thresholds", default="0.9,0.7,0.5,0.3")
    g.add_argument("--tasks", type=int, default=40, help="held-out tasks per kind (line, block)")
    g = parser.add_argument_group("prefix cache")
    g.add_argument("--contexts", default="512,2048,8192", help="prompt lengths in tokens")
    g.add_argument("--cache-span", type=int, default=16)
    g.add_argument("--cache-repeats", type=int, default=3)
    g.add_argument("--random-positions", type=int, default=16384, help="positions of the random-weight engine")
    g = parser.add_argument_group("LSP path")
    g.add_argument("--lsp-positions", type=int, default=12, help="cursor positions in the sample file")
    g.add_argument("--lsp-repeats", type=int, default=2)
    g.add_argument("--lsp-file", type=Path, default=REPO_ROOT / "examples" / "inventory.py")
    g.add_argument(
        "--lsp-remote",
        choices=("auto", "off"),
        default="auto",
        help="auto: with llama-cpp-python[server] installed, also measure both routes served by a local "
        "llama.cpp server (the remote backend) on the converted model",
    )
    g = parser.add_argument_group("output")
    g.add_argument("--json", type=Path, help="write the report here ('-': stdout)")
    g.add_argument("--plots", type=Path, help="write the PNGs into this folder")
    g.add_argument("--quick", action="store_true", help="a small run of every section (smoke test)")
    g.add_argument("--replot", type=Path, help="only redraw the PNGs of this report into --plots")
    g.add_argument("--no-progress", action="store_true")
    g.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    from decoder.bench.report import SECTIONS, BenchOptions

    if args.replot is not None:
        if args.plots is None:
            raise UserError("--replot needs --plots DIR")
        report = _read_report(args.replot)
        check_output_folder(args.plots, "--plots")
        for path in write_plots(report, args.plots):
            _say(f"wrote {path}")
        return 0
    if args.quick:
        for key, value in QUICK.items():
            if getattr(args, key) == _default(key):
                setattr(args, key, value)
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise UserError(f"unknown sections {sorted(unknown)}: expected some of {', '.join(SECTIONS)}")
    check_output_file(args.json, "--json")
    check_output_folder(args.plots, "--plots")
    opts = BenchOptions(
        spans=_ints(args.spans, "--spans"),
        prompts=args.prompts,
        repeats=args.repeats,
        threads=_ints(args.threads, "--threads"),
        block_size=args.block_size,
        threshold=args.threshold,
        span_thresholds=_floats(args.span_thresholds, "--span-thresholds"),
        thresholds=_floats(args.thresholds, "--thresholds"),
        tasks=args.tasks,
        contexts=_ints(args.contexts, "--contexts"),
        cache_span=args.cache_span,
        cache_repeats=args.cache_repeats,
        random_positions=args.random_positions,
        seed=args.seed,
        progress=not args.no_progress,
    )
    report = run_bench(args, sections, opts)
    if args.json is not None:
        text = json.dumps(report, indent=1)
        if str(args.json) == "-":
            print(text)
        else:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(text)
            _say(f"wrote {args.json}")
    if args.plots is not None:
        for path in write_plots(report, args.plots):
            _say(f"wrote {path}")
    return 0


def _default(key: str) -> Any:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.get_default(key)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run_bench(args: argparse.Namespace, sections: list[str], opts) -> dict[str, Any]:
    from decoder.bench import report as rep
    from decoder.machine import load_average, machine_info
    from lsp_server.model_loading import open_engine

    folder = Path(args.model) if args.model else default_model_dir()
    engine = open_engine(folder, args.device, args.dtype, backend=args.backend)
    out: dict[str, Any] = {
        "bench": "parafill bench",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "parafill " + " ".join(sys.argv[1:]),
        "machine": machine_info(),
        "model": rep.model_info(engine, folder),
        "sections": sections,
    }
    started = time.perf_counter()
    if "spans" in sections:
        extra = None
        if args.llamacpp == "auto" or args.gguf:
            out["llamacpp"], extra = _llamacpp(folder, engine, args, opts)
        out["spans"] = rep.run_spans(engine, opts, extra)
        print_spans(out["spans"])
    if "threshold" in sections:
        out["threshold"] = rep.run_threshold(engine, opts)
        print_threshold(out["threshold"])
    if "cache" in sections:
        out["cache"] = rep.run_cache(engine, opts)
        print_cache(out["cache"])
    if "lsp" in sections:
        out["lsp"] = run_lsp(args, folder)
        if args.lsp_remote == "auto":
            out["lsp_remote"] = run_lsp_remote(args, folder)
            if "summary" in out["lsp_remote"]:
                out["lsp"]["summary"] += out["lsp_remote"].pop("summary")
        if "summary" in out["lsp"]:
            print_lsp(out["lsp"]["summary"])
    out["seconds"] = round(time.perf_counter() - started, 1)
    out["machine"]["load_average_end"] = load_average()
    return out


def _llamacpp(folder: Path, engine, args: argparse.Namespace, opts) -> tuple[dict[str, Any], Any]:
    """GGUF files (given, or converted from the model), their parity with our engine, and a factory of
    llama.cpp span runners per thread count. Without llama-cpp-python: a note, no runners."""
    from decoder.bench import llamacpp

    if not llamacpp.available():
        note = "llama-cpp-python is not installed (benchmarks/llamacpp/install.sh builds it): llama.cpp not timed"
        _say(f"parafill bench: {note}")
        return {"skipped": note}, None
    files: list[Path] = list(args.gguf)
    info: dict[str, Any] = {"version": llamacpp.version(), "files": []}
    if not files:
        from decoder.bench.gguf_export import GGUFExportError, export_gguf

        tmp = Path(tempfile.mkdtemp(prefix="parafill-gguf-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # the runners read the files until the end
        try:
            for dtype in ("f32", "f16"):
                exported = export_gguf(folder, tmp / f"model-{dtype}.gguf", dtype)
                info["files"].append(exported)
                files.append(Path(exported["path"]))
        except GGUFExportError as exc:
            note = f"cannot convert the model to GGUF: {exc}"
            _say(f"parafill bench: {note}")
            return {"skipped": note}, None
    info["parity"] = {f.name: llamacpp.parity(engine, f, seed=opts.seed) for f in files}
    for name, parity in info["parity"].items():
        _say(f"llama.cpp parity {name}: {llamacpp.format_parity(parity)}")

    def runners(threads: int) -> list:
        return [llamacpp.LlamaCppSpanRunner(f, threads) for f in files]

    return info, runners


def run_lsp(
    args: argparse.Namespace,
    folder: Path,
    settings: list[str] | None = None,
    compare_ar: bool = True,
    label: str | None = None,
) -> dict[str, Any]:
    """benchmarks/lsp_latency.py's measurement: cold / warm / typed-ahead at cursor positions, idle, while
    an explain runs, and with the AR decoder, through a real server process. `settings`: extra server
    settings (KEY=VALUE); `label` replaces "block" in the series names."""
    script = REPO_ROOT / "benchmarks" / "lsp_latency.py"
    if not script.is_file():
        return {"skipped": f"{script} is not here (the LSP section needs a source checkout)"}
    spec = importlib.util.spec_from_file_location("parafill_lsp_latency", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ns = argparse.Namespace(
        model=str(folder),
        file=str(args.lsp_file),
        positions=args.lsp_positions,
        repeats=args.lsp_repeats,
        time_budget_ms=2000,
        setting=settings or [],
        with_explain=True,
        compare_ar=compare_ar,
        json=None,
        verbose=False,
    )
    result = asyncio.run(module.run(ns))
    result.pop("records", None)
    if label is not None:
        for row in result["summary"]:
            row["series"] = row["series"].replace("block", label)
    result["note"] = (
        "client-side latency (request sent -> response read) over stdio; p99 of n samples is their "
        "interpolated 99th percentile (close to the maximum for small n)"
    )
    return result


def run_lsp_remote(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """The same measurement with inline completion on a llama.cpp server on 127.0.0.1 (the remote backend),
    serving the model converted to GGUF (f16), FIM prompt in the model's own SPM format. Explain stays on
    the embedded engine (lsp_latency waits for a loaded local model, which remoteRoutes=both never loads)."""
    from decoder.bench import llamacpp

    if not llamacpp.server_available():
        return {"skipped": "llama-cpp-python[server] is not installed: no remote series"}
    with tempfile.TemporaryDirectory(prefix="parafill-gguf-") as scratch:
        return _remote_series(args, folder, Path(scratch))


def _remote_series(args: argparse.Namespace, folder: Path, tmp: Path) -> dict[str, Any]:
    """run_lsp_remote's work, with its GGUF file and server log in `tmp`."""
    from decoder.bench import llamacpp
    from decoder.bench.gguf_export import GGUFExportError, export_gguf

    try:
        gguf = Path(export_gguf(folder, tmp / "model-f16.gguf", "f16")["path"])
    except GGUFExportError as exc:
        return {"skipped": f"cannot convert the model to GGUF: {exc}"}
    with llamacpp.serve(gguf, threads=1, log=tmp / "server.log") as url:
        settings = [
            f"remoteUrl={url}",
            "remoteRoutes=inline",
            "remoteFimTemplate=<|fim_suffix|>{suffix}<|fim_prefix|>{prefix}<|fim_middle|>",
        ]
        result = run_lsp(args, folder, settings, compare_ar=False, label="remote llama.cpp")
    result["server"] = f"python -m llama_cpp.server --model {gguf.name} --n_threads 1 (127.0.0.1)"
    result["note"] = (
        "inline completion served by llama.cpp over HTTP (SSE), explain by the embedded engine (AR) on the same "
        "CPU. parafill/clearCache clears only parafill's own cache: 'cold' here still has llama.cpp's own reuse "
        "of its previous prompt"
    )
    return result


def write_plots(report: dict[str, Any], folder: Path) -> list[Path]:
    from decoder.bench import plots

    folder.mkdir(parents=True, exist_ok=True)
    model = report["model"]
    title = f"{Path(model['folder'] or 'model').name}: {model['parameters'] / 1e6:.1f}M parameters"
    written = []
    if "spans" in report:
        plots.plot_spans(report["spans"], folder / "span_latency.png", f"latency vs span ({title})")
        written.append(folder / "span_latency.png")
    if "threshold" in report:
        plots.plot_threshold(report["threshold"], folder / "threshold.png", f"quality vs threshold ({title})")
        written.append(folder / "threshold.png")
    if "cache" in report:
        plots.plot_cache(report["cache"], folder / "prefix_cache.png")
        written.append(folder / "prefix_cache.png")
    if "summary" in report.get("lsp", {}):
        plots.plot_lsp(report["lsp"]["summary"], folder / "lsp_latency.png", f"inline latency, LSP path ({title})")
        written.append(folder / "lsp_latency.png")
    return written


# -- console tables ------------------------------------------------------------------------------------


def print_spans(spans: dict[str, Any]) -> None:
    for threads, entry in spans["threads"].items():
        print(f"\nlatency vs span, {threads} thread(s), median ms (decode after prefill / whole request, cold prompt)")
        names = list(entry["summary"])
        print(f"{'span':>6}" + "".join(f"{n[:26]:>28}" for n in names))
        for i, span in enumerate(spans["spans"]):
            cells = []
            for name in names:
                row = entry["summary"][name]["rows"][i]
                cells.append(f"{row['decode_ms']:>11.1f} / {row['total_ms']:>10.1f}    ")
            print(f"{span:>6}" + "".join(cells))
        fits = "  ".join(
            f"{n}: {s['fit_decode']['exponent']:.2f} ({s['fit_total']['exponent']:.2f})"
            for n, s in entry["summary"].items()
        )
        print(f"exponent decode (total): {fits}")


def print_threshold(threshold: dict[str, Any]) -> None:
    print("\nquality and tokens per forward vs threshold")
    for kind, rows in threshold["kinds"].items():
        for r in rows:
            print(
                f"{kind:>6} {r['config']:<20} EM {r['exact_match'] * 100:5.1f}%  ES {r['edit_similarity']:.3f}  "
                f"tok/fwd {r['tokens_per_forward']:.2f}  p50 {r['latency_ms_p50']:.0f} ms"
            )


def print_cache(cache: dict[str, Any]) -> None:
    for entry in cache.values():
        print(f"\nprefix cache, {entry['label']}: {entry['span']}-token span")
        for r in entry["rows"]:
            print(
                f"{r['context_tokens']:>7} tokens  cold {r['cold_ms']:>9.1f} ms  warm {r['warm_ms']:>8.1f} ms  "
                f"({r['cold_over_warm']}x, {r['warm_cached_prompt_tokens']} of {r['warm_prompt_tokens']} cached)"
            )
        for s in entry["skipped"]:
            print(f"{s['target']:>7} tokens  skipped: {s['reason']}")


def print_lsp(summary: list[dict[str, Any]]) -> None:
    print("\ninline completion through the LSP path (client side)")
    for r in summary:
        print(f"{r['series']:<26}{r['kind']:<13}n {r['n']:>3}  p50 {r['p50_ms']:>8.1f} ms  p99 {r['p99_ms']:>8.1f} ms")
