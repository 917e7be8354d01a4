"""Remote settings: parsed leniently like the others; nothing is remote unless remoteUrl is set."""

from __future__ import annotations

from lsp_server.remote import _fill, remote_config, serves
from lsp_server.settings import Settings, parse_settings


def test_defaults_keep_everything_local():
    s = Settings()
    assert remote_config(s) is None and not serves(s, "inline") and not serves(s, "explain")


def test_routes_follow_remote_routes():
    s, warnings = parse_settings({"parafill": {"remoteUrl": "http://127.0.0.1:8000/v1", "remoteModel": "m"}})
    assert not warnings and serves(s, "explain") and not serves(s, "inline")
    s, _ = parse_settings({"remoteRoutes": "both"}, s)
    assert serves(s, "inline") and serves(s, "explain")
    s, _ = parse_settings({"remoteRoutes": "inline"}, s)
    assert serves(s, "inline") and not serves(s, "explain")
    cfg = remote_config(s)
    assert cfg is not None and cfg.model == "m" and cfg.read_timeout_s == 30.0


def test_bad_values_are_warned_about_and_ignored():
    s, warnings = parse_settings(
        {"remoteUrl": "ftp://host/v1", "remoteRoutes": "everything", "remoteExplainApi": "x", "remoteTimeoutMs": 5}
    )
    assert len(warnings) == 4 and s.remote_url is None and s.remote_routes == "explain"
    s, warnings = parse_settings({"remoteApiKey": "sk-secret"})
    assert warnings == ["unknown setting 'remoteApiKey': ignored"]  # a key is never a setting, nor echoed


def test_null_remote_url_turns_the_backend_off():
    s, _ = parse_settings({"remoteUrl": "https://api.example.invalid/v1", "remoteRoutes": "both"})
    s, _ = parse_settings({"remoteUrl": None}, s)
    assert remote_config(s) is None and not serves(s, "inline")


def test_templates_fill_literally():
    template = "<|fim_suffix|>{suffix}<|fim_prefix|>{prefix}<|fim_middle|>"
    filled = _fill(template, prefix="d = {'a': {x}}", suffix="}")
    assert filled == "<|fim_suffix|>}<|fim_prefix|>d = {'a': {x}}<|fim_middle|>"
    # code that spells a placeholder is code, not a placeholder (the old one-after-another replace filled it)
    filled = _fill("{prefix}<FIM>{suffix}", prefix='f"{prefix}{suffix}"', suffix="\nprint(x)\n")
    assert filled == 'f"{prefix}{suffix}"<FIM>\nprint(x)\n'
