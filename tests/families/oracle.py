"""Independent re-statements of the published block decoders (Fast-dLLM v2's generate, SDAR's
block_diffusion_generate), greedy, with no KV cache: every step re-runs the whole sequence under a
block-causal mask. Written from the algorithms' descriptions to check the engine's cached, fused passes."""

from __future__ import annotations

import torch

from decoder.model import CausalLM


def _hidden(model: CausalLM, ids: list[int], block: int) -> torch.Tensor:
    pos = torch.arange(len(ids))
    mask = (pos[None, :] // block) <= (pos[:, None] // block)  # block-causal on the absolute grid
    with torch.no_grad():
        return model(torch.tensor([ids]), pos[None], attn_mask=mask)[0]


def _scores(model: CausalLM, hidden: torch.Tensor, bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        logits = model.logits(hidden).float()
    if bias is not None:
        logits = logits + bias
    probs = torch.softmax(logits, dim=-1)
    conf, token = probs.max(dim=-1)
    return token, conf


def fast_dllm_v2(model, prompt, mask_id, block, sub_block, threshold, n_tokens, stop_ids, bias):
    """Token shift; sub-blocks left to right; a finished block's last output gives the next first token."""
    x = list(prompt)
    start_len = len(x)

    def stopped() -> bool:
        return any(t in stop_ids for t in x[start_len:] if t != mask_id)

    if len(x) % block == 0:
        token, _ = _scores(model, _hidden(model, x, block)[-1:], bias)
        x.append(int(token[0]))
    while len(x) - start_len < n_tokens and not stopped():
        base = len(x) // block * block
        x = x + [mask_id] * (base + block - len(x))
        for lo in range(0, block, sub_block):
            positions = range(base + lo, base + lo + sub_block)
            while any(x[p] == mask_id for p in positions):
                hidden = _hidden(model, x, block)
                token, conf = _scores(model, hidden[[p - 1 for p in positions]], bias)
                masked = torch.tensor([x[p] == mask_id for p in positions])
                conf = torch.where(masked, conf, torch.full_like(conf, -1.0))
                commit = masked & (conf > threshold)
                commit[int(conf.argmax())] = True
                for i, p in enumerate(positions):
                    if commit[i]:
                        x[p] = int(token[i])
                if _final_stop(x, start_len, mask_id, stop_ids):
                    return _trim(x[start_len:], stop_ids, mask_id)
        token, _ = _scores(model, _hidden(model, x, block)[-1:], bias)
        x.append(int(token[0]))
    return _trim(x[start_len:], stop_ids, mask_id)


def sdar(model, prompt, mask_id, block, threshold, n_tokens, stop_ids, bias):
    """No token shift: the output at a masked position predicts it; at least one commit per step."""
    x = list(prompt)
    start_len = len(x)
    while len(x) - start_len < n_tokens:
        base = len(x) // block * block
        x = x + [mask_id] * (base + block - len(x))
        positions = range(base, base + block)
        while any(x[p] == mask_id for p in positions):
            hidden = _hidden(model, x, block)
            token, conf = _scores(model, hidden[base : base + block], bias)
            masked = torch.tensor([x[p] == mask_id for p in positions])
            conf = torch.where(masked, conf, torch.full_like(conf, -1.0))
            commit = masked & (conf > threshold)
            if not commit.any():
                commit[int(conf.argmax())] = True
            for i, p in enumerate(positions):
                if commit[i]:
                    x[p] = int(token[i])
            if _final_stop(x, start_len, mask_id, stop_ids):
                return _trim(x[start_len:], stop_ids, mask_id)
    return _trim(x[start_len:], stop_ids, mask_id)


def _final_stop(x, start_len, mask_id, stop_ids) -> bool:
    """A stop token with nothing masked before it: the output is decided."""
    for t in x[start_len:]:
        if t == mask_id:
            return False
        if t in stop_ids:
            return True
    return False


def _trim(out: list[int], stop_ids, mask_id) -> list[int]:
    kept = []
    for t in out:
        if t in stop_ids or t == mask_id:
            break
        kept.append(t)
    return kept
