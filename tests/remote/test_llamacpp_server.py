"""The remote client and the language server against llama-cpp-python's OpenAI-compatible server on
127.0.0.1, serving the shipped default model converted to GGUF (a trained model: its greedy text is valid
UTF-8, which a random one's is not, so texts can be compared). Skipped unless llama-cpp-python[server] and
gguf are installed (benchmarks/llamacpp/install.sh; CI does not build llama.cpp)."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")
pytest.importorskip("gguf")
pytest.importorskip("llama_cpp")
pytest.importorskip("llama_cpp.server")


from decoder.bench import llamacpp
from decoder.bench.gguf_export import export_gguf
from decoder.defaults import default_model_dir
from decoder.engine import EngineOptions
from decoder.engines import open_family_engine
from decoder.generation import GenerationParams
from decoder.prompts import fim_prompt
from decoder.remote import RemoteConfig, stream_completion
from decoder.remote.client import completion_body
from decoder.router import generate
from tests.lsp.session import SAMPLE, Session, doc_uri


@pytest.fixture(scope="module")
def model():
    folder = default_model_dir()
    if not (folder / "config.json").is_file():
        pytest.skip(f"no model in {folder}")
    return folder


@pytest.fixture(scope="module")
def server(model, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("llamacpp")
    export_gguf(model, tmp / "model.gguf", "f32")
    with llamacpp.serve(tmp / "model.gguf", threads=1, log=tmp / "server.log", n_ctx=2048, alias="tiny") as url:
        yield url


def _banned_bias(engine) -> dict[str, float]:
    """Our decoders never emit the mask or prompt-format tokens: ask llama.cpp for the same."""
    banned = [i for i, v in enumerate(engine.logit_bias.tolist()) if v == float("-inf")]
    return {str(i): -100.0 for i in banned}


def test_streamed_greedy_completion_matches_our_ar_decoder(server, model):
    engine = open_family_engine(model, EngineOptions(threads=1))
    tok = engine.tokenizer
    prefix = "class Stack:\n    def __init__(self):\n        self.items = []\n\n"
    prefix += "    def push(self, item):\n        self."
    suffix = "\n\n    def pop(self):\n        return self.items.pop()\n"
    ids = fim_prompt(tok, prefix, suffix, "spm", token_healing=False).ids
    text = tok.decode(ids)  # the prompt as text, special tokens spelled out: the server parses them
    eot = tok.special.end_of_text
    ours = generate(engine, ids, "ar", GenerationParams(max_new_tokens=24, stop_token_ids=frozenset({eot})))
    cfg = RemoteConfig(server, model="tiny")
    body = completion_body(cfg, text, 24, extra={"repeat_penalty": 1.0, "logit_bias": _banned_bias(engine)})
    pieces: list[str] = []
    res = stream_completion(cfg, body, on_text=pieces.append)
    assert res.text == ours.text and len(pieces) >= 2


def test_cancel_closes_the_stream_and_the_server_keeps_serving(server):
    cfg = RemoteConfig(server, model="tiny")
    got: list[str] = []
    body = completion_body(cfg, "def f(x):\n", 1500, extra={"repeat_penalty": 1.0})
    res = stream_completion(cfg, body, on_text=got.append, interrupt=lambda: "cancelled" if len(got) >= 3 else None)
    assert res.stop_reason == "cancelled" and res.closed_early and len(got) >= 3
    again = stream_completion(cfg, completion_body(cfg, "x = ", 4))
    assert again.finish_reason in ("length", "stop")


async def test_language_server_explains_through_llamacpp(server, model):
    options = {
        "model": str(model),
        "remoteUrl": server,
        "remoteModel": "tiny",
        "remoteExplainApi": "completions",
        "explainMaxTokens": 24,
    }
    s = await Session().start(options)
    try:
        uri = doc_uri("llamacpp_explain.py")
        s.open(uri, SAMPLE.read_text())
        rng = {"start": {"line": 16, "character": 0}, "end": {"line": 19, "character": 0}}
        params = {"textDocument": {"uri": uri}, "range": rng, "workDoneToken": "l1"}
        answer = await s.request("parafill/explain", params)
        assert answer["route"] == "remote" and answer["stop_reason"] in ("length", "stop_token")
        streamed = "".join(v.get("message", "") for t, v in s.progress if t == "l1" and v["kind"] == "report")
        assert streamed == answer["text"]
    finally:
        await s.stop()
