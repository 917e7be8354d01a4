"""Inline-completion latency through the LSP path: `parafill serve` over stdio, a real document, real requests.

For each of several cursor positions in the sample file it measures, client-side (request sent ->
response read):
  cold         the first request there, with the server's prefix cache cleared (parafill/clearCache)
  warm         after typing one character that is not the suggestion's start: the model runs again on a
               warm prefix cache (only the tail of the prompt is new)
  typed-ahead  after typing the suggestion's first character: answered from the last suggestion
and prints p50/p99 per kind, with the server's own numbers (forward passes, cached prompt tokens).

  --with-explain   also measure cold/warm while an explain request keeps the engine busy
  --compare-ar     also measure cold/warm with the AR decoder on the same model and positions (ratio)

    python benchmarks/lsp_latency.py                      # the shipped model (models/default)
    python benchmarks/lsp_latency.py --model DIR --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from decoder.bench.stats import percentile  # noqa: E402
from decoder.machine import machine_info  # noqa: E402
from lsp_server.protocol import plain  # noqa: E402

URI = "file:///benchmark/sample.py"


def positions(text: str, count: int) -> list[tuple[int, int]]:
    """Cursor positions spread over the file: alternately at the end of a code line (multi-line mode)
    and right after a line's first word (single-line mode: word characters follow)."""
    lines = text.split("\n")
    candidates = [i for i, line in enumerate(lines) if line.strip() and not line.strip().startswith(("#", '"""'))]
    step = max(1, len(candidates) // max(1, count))
    chosen = candidates[::step][:count]
    out = []
    for n, i in enumerate(chosen):
        line = lines[i]
        if n % 2 == 0:
            out.append((i, len(line)))
        else:
            stripped = line.lstrip()
            word = len(stripped.split()[0]) if stripped.split() else 0
            out.append((i, len(line) - len(stripped) + min(word, max(1, len(stripped) - 1))))
    return out


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.client = LanguageClient("parafill-bench", "1")
        self.text = Path(args.file).read_text()
        self.version = 1
        self.records: list[dict[str, Any]] = []
        self.progress_reports = 0
        self.explains_started = 0
        self._stderr_task: asyncio.Task | None = None

        @self.client.feature(types.PROGRESS)
        def on_progress(params: Any) -> None:  # explain streams here; counted, not shown
            self.progress_reports += 1

    async def start(self) -> None:
        await self.client.start_io(sys.executable, "-m", "lsp_server.cli", "serve", "--log-level", "WARNING", cwd=REPO)
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        options: dict[str, Any] = {"model": self.args.model, "timeBudgetMs": self.args.time_budget_ms}
        for item in self.args.setting:
            key, _, value = item.partition("=")
            options[key] = json.loads(value) if value[:1] in "0123456789-[{tf" else value
        caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
        params = types.InitializeParams(capabilities=caps, initialization_options=options, process_id=None)
        await self.client.initialize_async(params)
        self.client.initialized(types.InitializedParams())
        item = types.TextDocumentItem(uri=URI, language_id="python", version=1, text=self.text)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))
        stats = await self.request("parafill/stats", {})
        started = time.monotonic()
        while stats["model"]["state"] in ("loading", "idle"):
            await asyncio.sleep(0.2)
            stats = await self.request("parafill/stats", {})
            if time.monotonic() - started > 600:
                raise SystemExit("the model did not load within 10 minutes")
        if stats["model"]["state"] != "ready":
            raise SystemExit(f"the server could not load the model: {stats['model']['error']}")
        self.model = stats["model"]

    async def _drain_stderr(self) -> None:
        stream = self.client._server.stderr
        while line := await stream.readline():
            if self.args.verbose:
                print(line.decode(errors="replace").rstrip(), file=sys.stderr)

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await asyncio.wait_for(self.client._server.wait(), 30)
        await self.client.stop()

    async def request(self, method: str, params: Any) -> Any:
        return plain(await self.client.protocol.send_request_async(method, params))

    # -- document edits -------------------------------------------------------------------------------

    def edit(self, line: int, start: int, end: int, new: str) -> None:
        """Replace columns [start, end) of `line` (ASCII sample: columns are characters)."""
        lines = self.text.split("\n")
        lines[line] = lines[line][:start] + new + lines[line][end:]
        self.text = "\n".join(lines)
        self.version += 1
        rng = types.Range(types.Position(line, start), types.Position(line, end))
        change = types.TextDocumentContentChangePartial(range=rng, text=new)
        doc = types.VersionedTextDocumentIdentifier(uri=URI, version=self.version)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(doc, [change]))

    async def inline(self, line: int, col: int) -> tuple[float, str, dict[str, Any]]:
        params = types.InlineCompletionParams(
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
            text_document=types.TextDocumentIdentifier(uri=URI),
            position=types.Position(line, col),
        )
        started = time.perf_counter()
        result = await self.client.text_document_inline_completion_async(params)
        elapsed = (time.perf_counter() - started) * 1000
        items = result.items if isinstance(result, types.InlineCompletionList) else result or []
        last = (await self.request("parafill/stats", {}))["last"].get("inline", {})
        return elapsed, items[0].insert_text if items else "", last

    # -- one position, one series -------------------------------------------------------------------

    async def measure(self, label: str, line: int, col: int) -> None:
        """cold, warm and typed-ahead at one position; the document is restored afterwards."""
        await self.request("parafill/clearCache", {})
        ms, text, server = await self.inline(line, col)
        self.record(label, "cold", ms, text, server)
        typed = " " if not text.startswith(" ") else "#"  # not the suggestion's start: the model runs
        self.edit(line, col, col, typed)
        ms, text, server = await self.inline(line, col + 1)
        self.record(label, "warm", ms, text, server)
        if text and text[0] not in "\n\r" and len(text) > 1:
            self.edit(line, col + 1, col + 1, text[0])
            ms, rest, server = await self.inline(line, col + 2)
            self.record(label, "typed-ahead", ms, rest, server)
            self.edit(line, col + 1, col + 2, "")
        self.edit(line, col, col + 1, "")

    async def set_inline_mode(self, mode: str | None) -> None:
        settings = types.DidChangeConfigurationParams(settings={"parafill": {"inlineMode": mode}})
        self.client.workspace_did_change_configuration(settings)
        await self.request("parafill/stats", {})  # a round trip: the change is applied

    def record(self, label: str, kind: str, ms: float, text: str, server: dict[str, Any]) -> None:
        self.records.append(
            {
                "series": label,
                "kind": kind,
                "latency_ms": ms,
                "server_latency_ms": server.get("latency_ms"),
                "route": server.get("route"),
                "forward_passes": server.get("forward_passes"),
                "tokens": server.get("tokens"),
                "prompt_tokens": server.get("prompt_tokens"),
                "cached_prompt_tokens": server.get("cached_prompt_tokens"),
                "stop_reason": server.get("stop_reason"),
                "chars": len(text),
            }
        )

    async def explaining(self) -> tuple[asyncio.Event, asyncio.Task]:
        """Start explaining the whole file, again and again, until the event is set; returns once the
        first explanation is decoding."""
        stop = asyncio.Event()
        started = self.progress_reports
        task = asyncio.create_task(self._keep_explaining(stop))
        while self.progress_reports <= started + 1 and not task.done():
            await asyncio.sleep(0.005)
        return stop, task

    async def _keep_explaining(self, stop: asyncio.Event) -> int:
        lines = self.text.split("\n")
        rng = {"start": {"line": 0, "character": 0}, "end": {"line": len(lines) - 1, "character": 0}}
        done = 0
        while not stop.is_set():
            msg_id = f"bench-explain-{self.explains_started}"
            self.explains_started += 1
            params = {"textDocument": {"uri": URI}, "range": rng, "workDoneToken": msg_id}
            pending = asyncio.ensure_future(self.client.protocol.send_request_async("parafill/explain", params, msg_id))
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({pending, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not pending.done():  # stop now: cancel the explain in flight and wait for its answer
                self.client.cancel_request(types.CancelParams(id=msg_id))
                await asyncio.gather(pending, return_exceptions=True)
            else:
                done += pending.exception() is None
            stopped.cancel()
        return done


def summarise(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for key in dict.fromkeys((r["series"], r["kind"]) for r in records):
        group = [r for r in records if (r["series"], r["kind"]) == key]
        lat = [r["latency_ms"] for r in group]
        cached = [r["cached_prompt_tokens"] or 0 for r in group]
        prompt = [r["prompt_tokens"] or 0 for r in group]
        rows.append(
            {
                "series": key[0],
                "kind": key[1],
                "n": len(group),
                "p50_ms": round(percentile(lat, 0.5), 2),
                "p99_ms": round(percentile(lat, 0.99), 2),
                "mean_ms": round(statistics.fmean(lat), 2),
                "forward_passes_mean": round(statistics.fmean(r["forward_passes"] or 0 for r in group), 2),
                "tokens_mean": round(statistics.fmean(r["tokens"] or 0 for r in group), 2),
                "cached_prompt_fraction": round(sum(cached) / sum(prompt), 3) if sum(prompt) else 0.0,
                "time_budget_hits": sum(r["stop_reason"] == "time_budget" for r in group),
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    head = f"{'series':<14}{'kind':<13}{'n':>4}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'passes':>8}"
    head += f"{'tokens':>8}{'cached':>8}{'budget':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['series']:<14}{r['kind']:<13}{r['n']:>4}{r['p50_ms']:>10.1f}{r['p99_ms']:>10.1f}{r['mean_ms']:>10.1f}"
            f"{r['forward_passes_mean']:>8.1f}{r['tokens_mean']:>8.1f}{r['cached_prompt_fraction']:>8.2f}"
            f"{r['time_budget_hits']:>8}"
        )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    bench = Bench(args)
    await bench.start()
    spots = positions(bench.text, args.positions)
    series = ["block"] + (["block+explain"] if args.with_explain else []) + (["ar"] if args.compare_ar else [])
    explained = 0
    try:
        with tqdm(total=len(spots) * args.repeats, desc="positions", unit="pos", file=sys.stderr) as bar:
            await bench.inline(0, 0)  # warm up Python and torch (not at a measured position: typed-ahead)
            # Series interleave position by position (in a rotating order), so that the load of a shared
            # machine drifting over the run does not favour one series.
            for repeat in range(args.repeats):
                for n, (line, col) in enumerate(spots):
                    shift = (n + repeat) % len(series)
                    for label in series[shift:] + series[:shift]:
                        await bench.set_inline_mode("ar" if label == "ar" else None)
                        if label == "block+explain":
                            stop, explainer = await bench.explaining()
                            await bench.measure(label, line, col)
                            stop.set()
                            explained += await explainer
                        else:
                            await bench.measure(label, line, col)
                    bar.update(1)
        final = await bench.request("parafill/stats", {})
    finally:
        await bench.stop()
    rows = summarise(bench.records)
    out: dict[str, Any] = {
        "model": bench.model,
        "file": str(args.file),
        "positions": spots,
        "repeats": args.repeats,
        "machine": machine_info(),
        "summary": rows,
        "records": bench.records,
        "explains_completed_during_inline": explained,
        "explain_progress_reports": bench.progress_reports,
        "server_stats": {k: v for k, v in final.items() if k != "last"},
    }
    cold = {r["series"]: r for r in rows if r["kind"] == "cold"}
    if "ar" in cold and "block" in cold:
        out["ar_over_block_p50_cold"] = round(cold["ar"]["p50_ms"] / cold["block"]["p50_ms"], 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="model folder (default: the shipped model, models/default)")
    parser.add_argument("--file", default=str(REPO / "examples" / "inventory.py"), help="sample document")
    parser.add_argument("--positions", type=int, default=12, help="cursor positions in the file")
    parser.add_argument("--repeats", type=int, default=1, help="passes over the positions")
    parser.add_argument("--time-budget-ms", type=int, default=2000, help="the server's per-request budget")
    parser.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE", help="extra server setting")
    parser.add_argument("--with-explain", action="store_true", help="also measure while an explain runs")
    parser.add_argument("--compare-ar", action="store_true", help="also measure with the AR decoder")
    parser.add_argument("--json", type=Path, help="write all records and the summary here")
    parser.add_argument("--verbose", action="store_true", help="show the server's log")
    args = parser.parse_args()
    if args.model is None and not (REPO / "models" / "default" / "config.json").is_file():
        print("lsp_latency: models/default does not exist yet: pass --model DIR", file=sys.stderr)
        return 2
    out = asyncio.run(run(args))
    model = out["model"]
    print(f"model {model['folder']} ({model['parameters'] / 1e6:.2f}M parameters, {model['device']}, {model['dtype']})")
    print_table(out["summary"])
    if "ar_over_block_p50_cold" in out:
        print(f"AR / block-diffusion p50 (cold): {out['ar_over_block_p50_cold']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
