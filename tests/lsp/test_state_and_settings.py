"""Typed-ahead state (bounded, per document) and lenient settings parsing. No model."""

from __future__ import annotations

import json
import math

from lsp_server.doc_state import DocumentStates
from lsp_server.postprocess import Candidate
from lsp_server.settings import Settings, parse_settings

TEXT = "def f(x):\n    return \n\nprint(f(1))\n"
CURSOR = TEXT.index("return ") + len("return ")


def test_typed_ahead_serves_the_rest_of_the_suggestion():
    states = DocumentStates()
    states.remember("u", TEXT, CURSOR, CURSOR, Candidate("x * 2"), (0, len(TEXT)))
    typed = TEXT[:CURSOR] + "x *" + TEXT[CURSOR:]
    assert states.typed_ahead("u", typed, CURSOR + 3) == Candidate(" 2")
    assert states.typed_ahead("u", TEXT, CURSOR) == Candidate("x * 2")  # asked again at the same place
    other = TEXT[:CURSOR] + "y" + TEXT[CURSOR:]
    assert states.typed_ahead("u", other, CURSOR + 1) is None  # typed something else
    done = TEXT[:CURSOR] + "x * 2" + TEXT[CURSOR:]
    assert states.typed_ahead("u", done, CURSOR + 5) is None  # nothing left to suggest
    edited = TEXT.replace("print", "show")[:CURSOR] + "x" + TEXT[CURSOR:]
    assert states.typed_ahead("v", edited, CURSOR + 1) is None  # another document


def test_typed_ahead_needs_the_same_text_after_the_cursor():
    states = DocumentStates()
    states.remember("u", TEXT, CURSOR, CURSOR, Candidate("x * 2"), (0, len(TEXT)))
    changed_after = TEXT[:CURSOR] + "x" + TEXT[CURSOR:].replace("print", "show")
    assert states.typed_ahead("u", changed_after, CURSOR + 1) is None


def test_state_is_bounded_and_forgettable():
    states = DocumentStates(max_documents=3)
    for i in range(10):
        states.remember(f"u{i}", TEXT, CURSOR, CURSOR, Candidate("x"), (0, 1))
    assert len(states) == 3 and states.last("u9") is not None and states.last("u0") is None
    states.forget("u9")
    assert states.last("u9") is None


def test_settings_accept_camel_and_snake_case_under_a_section_and_keep_bad_values_out():
    settings, warnings = parse_settings(
        {"parafill": {"maxTokensLine": 8, "block_size": 4, "threshold": 2.0, "timeBudgetMs": "fast", "color": 1}}
    )
    assert settings.max_tokens_line == 8 and settings.block_size == 4
    assert settings.threshold == Settings().threshold and settings.time_budget_ms == Settings().time_budget_ms
    assert len(warnings) == 3 and any("color" in w for w in warnings)
    assert parse_settings(None) == (Settings(), [])
    assert parse_settings([1, 2])[1]
    changed, _ = parse_settings({"model": "/m", "cacheMB": 8}, settings)
    assert changed.engine_key != settings.engine_key and changed.max_tokens_line == 8
    assert parse_settings({"model": ""})[0].model is None
    assert parse_settings({"lookupTokens": 0})[0].lookup_tokens == 0  # drafts off
    assert parse_settings({"minConfidence": 0.3})[0].min_confidence == 0.3
    assert parse_settings({"minConfidence": 1.5})[0].min_confidence == Settings().min_confidence == 0.0
    too_many, warned = parse_settings({"lookupTokens": 65})
    assert too_many.lookup_tokens == Settings().lookup_tokens == 8 and warned


def test_numbers_json_allows_but_no_setting_means_are_refused_one_key_at_a_time():
    # Python's JSON reader turns 1e999 into inf and accepts NaN; a 400-digit integer overflows float().
    raw = json.loads('{"timeBudgetMs": 1e999, "threshold": NaN, "minConfidence": ' + "9" * 400 + ', "maxLines": 4}')
    settings, warnings = parse_settings(raw)
    assert settings.max_lines == 4 and len(warnings) == 3  # the good key still applies
    assert settings.time_budget_ms == Settings().time_budget_ms and settings.threshold == Settings().threshold
    assert settings.min_confidence == Settings().min_confidence
    assert parse_settings({"threshold": -math.inf})[0].threshold == Settings().threshold


def test_null_or_empty_means_the_default_even_where_the_default_is_not_none():
    configured, _ = parse_settings({"remoteApiKeyEnv": "MY_KEY", "model": "/m"})
    for cleared in (None, ""):
        settings, warnings = parse_settings({"remoteApiKeyEnv": cleared, "model": cleared}, configured)
        assert not warnings and settings.model is None
        assert settings.remote_api_key_env == Settings().remote_api_key_env == "PARAFILL_REMOTE_API_KEY"
