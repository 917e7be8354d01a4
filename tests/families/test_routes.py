"""One model for both routes or one per route; the chat-template explain prompt; the CLI flags."""

from __future__ import annotations

import json

import pytest

from decoder.engine import EngineOptions
from decoder.engines import ModelRoutes
from decoder.infill import infill
from decoder.prompts import PromptFormatError, chat_explain_prompt, render_chat
from decoder.tokenizer import TextTokenizer
from lsp_server.cli import main

CODE = "def add(a, b):\n    return a + b"


def test_chat_explain_prompt_matches_transformers_apply_chat_template(replica):
    from transformers import PreTrainedTokenizerFast

    folder = replica("qwen2_5_coder_7b_instruct")
    tok = TextTokenizer.from_folder(folder)
    ours = chat_explain_prompt(tok, CODE)
    ref = PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    messages = [
        {
            "role": "user",
            "content": f"Explain what the following code does, briefly and precisely.\n\n```python\n{CODE}\n```",
        }
    ]
    text = ref.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, chat_template=tok.chat_template
    )
    assert tok.decode(ours.ids) == text
    assert ours.ids == ref(text, add_special_tokens=False)["input_ids"]
    assert ours.ids[0] == 151644 and ours.ids.count(151645) == 1  # <|im_start|>, <|im_end|> as single ids
    assert text.endswith("<|im_start|>assistant\n")


def test_chat_template_sources_and_sandbox(replica, tmp_path):
    sdar = TextTokenizer.from_folder(replica("sdar_4b_chat"))  # chat_template.jinja beside the tokenizer
    assert sdar.chat_template is not None and "im_start" in sdar.chat_template
    src = replica("qwen2_5_coder_1_5b")
    (tmp_path / "tokenizer.json").write_bytes((src / "tokenizer.json").read_bytes())
    listed = [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ messages[0]['content'] }}"}]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": listed}))
    tok = TextTokenizer.from_folder(tmp_path)
    assert render_chat(tok, [{"role": "user", "content": "hi"}]) == "hi"
    tok.chat_template = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(PromptFormatError):
        render_chat(tok, [{"role": "user", "content": "hi"}])
    tok.chat_template = "{{ raise_exception('only user turns') }}"
    with pytest.raises(PromptFormatError, match="only user turns"):
        render_chat(tok, [{"role": "user", "content": "hi"}])
    with pytest.raises(PromptFormatError, match="no chat template"):
        chat_explain_prompt(TextTokenizer.from_folder(src), CODE)


def test_one_block_diffusion_model_serves_both_routes(replica):
    routes = ModelRoutes.open(replica("sdar_1_7b_chat"), options=EngineOptions(use_prefix_cache=False))
    assert routes.shared and routes.mode_for("inline") == routes.mode_for("explain") == "block"
    prompt = routes.explain_prompt(CODE)
    res = routes.generate("explain", prompt.ids, routes.params_for("explain", max_new_tokens=6))
    assert res.mode == "block" and len(res.token_ids) <= 6
    assert routes.describe()["inline"]["kv_layout"] == "block_causal"


def test_separate_explain_model_has_its_own_engine_and_cache(replica):
    routes = ModelRoutes.open(replica("fast_dllm_v2_1_5b"), replica("qwen2_5_coder_7b_instruct"))
    assert not routes.shared and routes.inline.cache is not routes.explain.cache
    assert (routes.mode_for("inline"), routes.mode_for("explain")) == ("block", "ar")
    prompt = routes.explain_prompt(CODE)
    assert prompt.ids[0] == 151644  # the explain model's chat template
    res = routes.generate("explain", prompt.ids, routes.params_for("explain", max_new_tokens=5))
    assert res.mode == "ar" and routes.explain.cache.stats.inserted_pages > 0
    assert routes.inline.cache.stats.lookups == 0
    ids = routes.inline.tokenizer.encode(CODE * 10)  # more than two blocks: the cache is consulted
    inline = routes.generate("inline", ids, routes.params_for("inline", max_new_tokens=5))
    assert inline.mode == "block" and routes.inline.cache.stats.lookups == 1


def test_ar_checkpoint_alone_serves_inline_with_ar(replica):
    routes = ModelRoutes.open(replica("qwen2_5_coder_1_5b"), options=EngineOptions(use_prefix_cache=False))
    assert routes.inline.mask_token_id is None
    assert (routes.mode_for("inline"), routes.mode_for("explain")) == ("ar", "ar")
    fim = routes.inline_prompt("def add(a, b):\n    return ", "\n")
    assert routes.fim_order() == "psm" and fim.ids[0] == 151659  # Qwen2.5-Coder's order: <|fim_prefix|> first
    assert routes.inline_prompt("a", "b", order="spm").ids[0] == 151661
    res = routes.generate("inline", fim.ids, routes.params_for("inline", max_new_tokens=4))
    assert res.mode == "ar" and len(res.token_ids) <= 4
    # Token healing over a tokenizer smaller than the padded embedding (151665 tokens, 151936 rows).
    params = routes.params_for("inline", max_new_tokens=4)
    healed = infill(routes.inline, "def add(a, b):\n    retu", "\n", "ar", params)
    assert healed.healed_text and "retu".endswith(healed.healed_text) and healed.generation.mode == "ar"


def test_cli_explain_model_and_route(replica, capsys):
    inline, explain = replica("fast_dllm_v2_1_5b"), replica("qwen2_5_coder_7b_instruct")
    args = [
        "generate",
        "--model",
        str(inline),
        "--explain-model",
        str(explain),
        "--route",
        "explain",
        "--prompt",
        CODE,
        "--max-new-tokens",
        "3",
        "--json",
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["route"]["kind"] == "explain" and out["route"]["mode"] == "ar" and out["route"]["family"] == "causal"
    assert out["prompt_tokens"] > 20  # the code inside the chat template
    assert (
        main(
            [
                "generate",
                "--model",
                str(inline),
                "--route",
                "inline",
                "--prompt",
                CODE,
                "--max-new-tokens",
                "3",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["route"]["mode"] == "block" and out["route"]["block_size"] == 32
    sdar = replica("sdar_1_7b_chat")
    assert main(["generate", "--model", str(sdar), "--mode", "ar", "--prompt", CODE]) == 2
    assert "block-causal" in capsys.readouterr().err
    assert main(["generate", "--model", str(sdar), "--block-size", "8", "--prompt", CODE]) == 2
    assert main(["generate", "--model", str(inline), "--explain-model", str(explain), "--prompt", CODE]) == 2


def test_long_outputs_go_to_ar_only_where_the_kv_layout_allows_it(replica, tiny_model_dir):
    from decoder.generation import GenerationParams

    long = GenerationParams(max_new_tokens=512, block_size=4)
    short = GenerationParams(max_new_tokens=16, block_size=4)
    causal = ModelRoutes.open(tiny_model_dir)
    assert causal.mode_for("inline", short) == "block"
    assert causal.mode_for("inline", long) == "ar"
    assert causal.mode_for("explain", short) == "ar"
    assert causal.mode_for("explain", short, preferred="block") == "block"
    block_causal = ModelRoutes.open(replica("sdar_4b_chat"))
    assert block_causal.engine_for("inline").kv_layout == "block_causal"
    assert block_causal.mode_for("inline", long) == "block"
    assert block_causal.mode_for("explain", long) == "block"
