"""FIM prompts, token healing, text stop rules, and where an explanation ends."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from decoder.engine import Engine
from decoder.generation import GenerationParams
from decoder.infill import completion_stop_rule, infill, stop_at_block_end, stop_at_line_end, tokens_spelling
from decoder.prompts import (
    PromptFormatError,
    _tokens_starting_with,
    explain_prompt,
    fim_prompt,
    heal,
    heal_indentation,
    stop_before_closing_quotes,
)
from decoder.router import generate
from decoder.tokenizer import TextTokenizer
from tests.tiny_models import train_tiny_tokenizer, write_tiny_qwen2


@pytest.fixture(scope="module")
def engine(tiny_model_dir) -> Engine:
    return Engine.from_folder(tiny_model_dir)


def test_spm_and_psm_layouts(engine):
    tok, sp = engine.tokenizer, engine.tokenizer.special
    p = fim_prompt(tok, "def f(x):\n    return x", "\n\nprint(f(1))\n", order="spm", token_healing=False)
    assert p.ids[0] == sp.fim_suffix and p.ids[-1] == sp.fim_middle
    assert p.ids.index(sp.fim_prefix) == 1 + len(tok.encode("\n\nprint(f(1))\n"))
    q = fim_prompt(tok, "a = ", "", order="psm", token_healing=False)
    assert q.ids[0] == sp.fim_prefix and q.ids[-2:] == [sp.fim_suffix, sp.fim_middle]
    e = explain_prompt(tok, "x = 1")
    assert e.ids[0] == sp.explain_code and e.ids[-1] == sp.explain_text


def test_explain_prompt_lays_the_code_out_as_training_did(engine):
    from decoder.training.corpus import explain_example

    tok, sp = engine.tokenizer, engine.tokenizer.special
    method = "\n    def size(self):\n        return len(self.items)\n\n"  # selected inside its class
    trained = tok.encode(explain_example("def size(self):\n    return len(self.items)", "doc"))
    ids = explain_prompt(tok, method).ids
    assert ids == trained[: trained.index(sp.explain_text) + 1]


def test_healing_backs_off_the_last_token_and_allows_only_extensions(engine):
    tok = engine.tokenizer
    ids = tok.encode("self.ite")
    kept, text, allowed = heal(tok, ids)
    assert kept == ids[:-1] and tok.decode(ids[-1:]) == text
    chosen = allowed.nonzero().flatten().tolist()
    assert ids[-1] in chosen
    assert all(tok.token_texts[i].startswith(text) for i in chosen)
    assert not allowed[tok.special.end_of_text]


def test_healing_mask_equals_a_scan_of_every_token(engine):
    tok = engine.tokenizer
    texts = tok.token_texts
    for text in [texts[i] for i in range(0, len(texts), 37)] + ["ite", " ", "é", "\ufffd"]:
        if not text:
            continue
        scan = torch.tensor([t.startswith(text) for t in texts])
        assert torch.equal(_tokens_starting_with(tok, text), scan), text


def test_indentation_healing_backs_off_one_space_and_allows_only_code_on_the_line(engine):
    tok = engine.tokenizer
    prefix = "class Stack:\n    def pop(self):\n        "
    ids, text, allowed = heal_indentation(tok, prefix)
    assert ids == tok.encode(prefix[:-1]) and text == " "
    chosen = [tok.token_texts[i] for i in allowed.nonzero().flatten().tolist()]
    assert chosen and all(t[0] == " " and (t[1].isalnum() or t[1] in "_\"'([{@#-~*") for t in chosen)
    assert not any("\n" in t[:2] for t in chosen)
    assert " in" in tok.token_texts and not any(t.split()[0] in {"in", "and", "or", "is", "as"} for t in chosen)
    # Only after the indentation of a blank line.
    assert heal_indentation(tok, "x = 1\n") is None
    assert heal_indentation(tok, "def f():\n    return") is None
    assert heal_indentation(tok, "x = [\n    1,\n") is None
    assert fim_prompt(tok, prefix, "\n").healed_text == " "
    assert fim_prompt(tok, prefix, "\n", token_healing=False).healed_text == ""


def test_a_completion_on_a_blank_indented_line_starts_on_that_line(engine):
    prefix = "class Stack:\n    def pop(self):\n        "
    for mode in ("ar", "block"):
        res = infill(engine, prefix, "\n", mode, GenerationParams(max_new_tokens=8, block_size=4, threshold=0.5))
        assert res.healed_text == " "
        first = engine.tokenizer.token_texts[res.generation.token_ids[0]]
        assert first[0] == " " and not first[1].isspace(), first
        assert res.text and not res.text[0].isspace(), res.text


def test_infill_output_starts_after_the_healed_text(engine):
    res = infill(
        engine,
        "class Stack:\n    def push(self, item):\n        self.ite",
        "\n",
        "block",
        GenerationParams(max_new_tokens=8, block_size=4, threshold=0.5),
    )
    first = engine.tokenizer.token_texts[res.generation.token_ids[0]]
    assert first.startswith(res.healed_text)
    assert engine.tokenizer.decode(res.generation.token_ids).startswith(res.healed_text + res.text)


@pytest.mark.parametrize("mode", ["ar", "block"])
def test_healing_works_when_the_model_has_more_rows_than_the_tokenizer(tmp_path, mode):
    # Checkpoints pad their vocabulary (Qwen: 151,665 tokens, 151,936 rows): the healing mask must be widened.
    width = train_tiny_tokenizer().get_vocab_size() + 16
    padded = Engine.from_folder(write_tiny_qwen2(tmp_path / "padded", vocab_size=width))
    assert padded.model.config.vocab_size == width
    res = infill(padded, "class Stack:\n    def push(self, item):\n        self.ite", "\n", mode, GenerationParams(8))
    assert res.healed_text and padded.tokenizer.token_texts[res.generation.token_ids[0]].startswith(res.healed_text)


@pytest.mark.parametrize("mode", ["ar", "block"])
def test_padded_vocabulary_rows_are_never_generated(tmp_path, mode):
    tokens = train_tiny_tokenizer().get_vocab_size()
    padded = Engine.from_folder(write_tiny_qwen2(tmp_path / "padded", vocab_size=tokens + 16))
    ids = padded.tokenizer.encode("def add(a, b):\n    return ")
    with torch.inference_mode():
        hidden = padded.start(ids, reserve=1).last_hidden
        raw = padded.model.logits(hidden)
        head = padded.model.lm_head.weight
        head[tokens:] = head[int(raw.argmax())] * 2  # the padding rows now outscore the model's favourite
        assert padded.model.logits(hidden)[tokens:].min() > raw.max() > 0
    res = generate(padded, ids, mode, GenerationParams(max_new_tokens=6, block_size=4))
    assert res.token_ids and max(res.token_ids) < tokens


SHIPPED = Path(__file__).resolve().parents[2] / "models" / "default"


def test_the_kept_tokens_spell_a_character_split_over_byte_tokens():
    tok = TextTokenizer.from_folder(SHIPPED)
    ids = tok.encode("# café\nfoo")
    assert sum("\ufffd" in tok.token_texts[i] for i in ids) == 2  # "é" is two byte tokens in this tokenizer
    k = tokens_spelling(tok.decode, ids, "# café")
    assert tok.decode(ids[:k]) == "# café"  # counting characters kept "# caf\ufffd": half of the "é"


def test_no_healing_on_a_byte_of_a_split_character():
    tok = TextTokenizer.from_folder(SHIPPED)
    for prefix in ("# café", "s = '日本"):
        ids = tok.encode(prefix)
        assert heal(tok, ids)[:2] == (ids, "")  # the byte token stays: there is no text of it to extend


def test_stop_rules_read_crlf_lines_as_lines():
    assert stop_at_line_end("abc\r\ndef") == 3 and stop_at_line_end("\r\n") == 0
    crlf = "x = 1\r\n\r\n    y = 2\r\nz = 3\r\n"
    assert stop_at_block_end(indent=4)(crlf) == len("x = 1\r\n\r\n    y = 2\r")  # at the dedent, not the blank
    assert completion_stop_rule(True, 4, 16)("x = 1\r\n\r\n    y = 2\r\n    w") is None


def test_text_stop_rules():
    assert stop_at_line_end("abc") is None and stop_at_line_end("ab\ncd") == 2
    rule = stop_at_block_end(indent=4)
    assert rule("x = 1\n    y = 2\n") is None
    assert rule("x = 1\n    y = 2\nz = 3\n") == len("x = 1\n    y = 2")
    assert rule("x = 1\n\n    y\n") is None  # blank lines do not end a block
    assert stop_at_block_end(indent=0, max_lines=2)("a\nb\nc\nd\n") == len("a\nb")
    assert stop_at_block_end(indent=0, max_lines=1)("a\nb") == len("a")
    assert stop_at_block_end(indent=0, max_lines=1)("ab") is None


def test_block_stop_rule_cuts_a_repeated_line():
    rule = stop_at_block_end(indent=4)
    loop = "\n    self.items = self.items()\n    self.items = self.items()\n    self.items = self.items()\n"
    assert loop[: rule(loop)] == "\n    self.items = self.items()"
    assert rule("\n    x = 1\n\n    x = 1\n") == len("\n    x = 1\n")  # a blank line between: still a loop
    assert rule("\n    x = 1\n    y = 1\n    x = 1\n") is None  # not consecutive: code, not a loop
    assert rule("\n    if a:\n        return 1\n    return 1\n") is None  # another indentation
    first = "self.items.append(item)\n        self.items.append(item)\n"  # typed on a blank line at column 8
    assert first[: stop_at_block_end(indent=8)(first)] == "self.items.append(item)"
    cycle = "\n    a = f(x)\n    b = g(a)\n    a = f(x)\n    b = g(a)\n    a = f(x)\n"
    assert cycle[: rule(cycle)] == "\n    a = f(x)\n    b = g(a)"  # a two-line loop


def test_completion_stop_rule_also_cuts_loops_within_a_line():
    line = completion_stop_rule(multiline=False, indent=0, max_lines=1)
    assert line("x = a list of a list of a list of a list\nnext") == len("x = a list of")
    assert line("x = 1\nnext") == len("x = 1")
    block = completion_stop_rule(multiline=True, indent=4, max_lines=16)
    text = '\n    """Return the sum of a and b and b and b and b and b and b'
    assert text[: block(text)] == '\n    """Return the sum of a and b'
    assert block("\n    return a + b\n") is None
    # The final check (the text with a newline added, as infill does) cuts the same way.
    assert block(text + "\n") == block(text)


def test_single_line_infill_stops_generation_at_the_newline(engine):
    # A prompt after which this tiny model's free-running text crosses a line end.
    args = (engine, "    return self.", "\n", "ar", GenerationParams(max_new_tokens=48))
    free = infill(*args, stop_rule=None, token_healing=False)
    free_text = engine.tokenizer.decode(free.generation.token_ids)
    assert "\n" in free_text
    res = infill(*args, stop_rule=stop_at_line_end, token_healing=False)
    assert res.generation.stop_reason == "stop_rule"
    assert len(res.generation.token_ids) < len(free.generation.token_ids)  # generation stopped, not just the text
    assert res.text == free_text[: free_text.index("\n")]


def test_tokens_decoded_past_the_stop_are_not_part_of_the_completion(engine):
    # Threshold 0: a block step commits its whole block at once, the line end and whatever follows it.
    params = GenerationParams(max_new_tokens=48, block_size=8, threshold=0.0)
    res = infill(engine, "    return self.", "\n", "block", params, stop_rule=stop_at_line_end, token_healing=False)
    gen = res.generation
    assert gen.stop_reason == "stop_rule" and engine.tokenizer.decode(gen.token_ids).startswith(res.text)
    assert len(engine.tokenizer.decode(gen.token_ids[:-1])) < len(res.text)  # every kept token makes the text
    assert len(gen.token_ids) == len(gen.commit_steps) == len(gen.token_confidences)


def test_fim_needs_fim_tokens(engine, monkeypatch):
    from dataclasses import replace

    monkeypatch.setattr(engine.tokenizer, "special", replace(engine.tokenizer.special, fim_middle=None))
    with pytest.raises(PromptFormatError):
        fim_prompt(engine.tokenizer, "a", "b")


@pytest.mark.parametrize("quotes", ['"""', "'''"])
def test_an_explanation_ends_before_the_docstring_s_closing_quotes(engine, quotes):
    tok = engine.tokenizer
    rule = stop_before_closing_quotes(tok)
    ids = tok.encode(f"Return the sum of a and b.\n    {quotes}\n    return a + b\n")
    fired = next(n for n in range(1, len(ids) + 1) if rule(ids[:n]) is not None)
    keep = rule(ids[:fired])
    assert quotes not in tok.decode(ids[: fired - 1]) and quotes in tok.decode(ids[:fired])  # as soon as written
    assert tok.decode(ids[:keep]).rstrip() == "Return the sum of a and b."
    plain = tok.encode("Return the sum of a and b, as in \"a\" + 'b'.\n")
    assert all(rule(plain[:n]) is None for n in range(1, len(plain) + 1))
