"""A Llama / Qwen2 / Qwen3-family decoder in plain PyTorch: config -> blocks -> model.

The model is only math. It does not know about requests or caches: a forward pass is handed the
key/value buffers to write into (or none, for training) and an attention mask (or none, for causal).
Module and parameter names follow Hugging Face so checkpoints load without renaming.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from decoder.config import ModelConfig
from decoder.masks import JointMask


@dataclass
class LayerKV:
    """One layer's key/value buffers [batch, kv_heads, capacity, head_dim]; the engine owns them."""

    keys: Tensor
    values: Tensor


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        # Normalise in fp32 and cast back before the weight, as transformers does (bit-compatible logits).
        dtype = x.dtype
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(dtype)


def rope_cos_sin(positions: Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """cos/sin tables [batch, 1, seq, head_dim] for NEOX-style (rotate-half) rotary embeddings."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device).float() / head_dim))
    freqs = positions.float()[..., None] * inv_freq  # [batch, seq, head_dim/2]
    emb = torch.cat((freqs, freqs), dim=-1)[:, None]
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | JointMask | None, is_causal: bool, expand_groups: bool
) -> Tensor:
    """Scaled dot-product attention, grouped-query when k/v have fewer heads than q. `expand_groups` repeats
    the key/value heads instead: on CUDA, flash attention takes no mask and the memory-efficient kernel,
    which does, need not take grouped heads, so a masked pass would fall back to the unfused math kernel
    (every score in memory). The copies cost a few MB; the result is the same."""
    if isinstance(mask, JointMask):
        # Training's [noisy ; clean] input: the clean rows as a causal pass over the clean keys, then the noisy
        # rows with their mask over all keys. On CUDA both with the key/value heads repeated, as for any mask:
        # then every fused kernel can take them.
        L = mask.seq_len
        clean = attention(q[:, :, L:], k[:, :, L:], v[:, :, L:], None, True, expand_groups)
        noisy = attention(q[:, :, :L], k, v, mask.noisy_rows, False, expand_groups)
        return torch.cat((noisy, clean), dim=2)
    groups = q.shape[1] // k.shape[1]
    if expand_groups and groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=is_causal, enable_gqa=k.shape[1] != q.shape[1]
    )


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.num_attention_heads
        self.n_kv_heads = cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        bias = cfg.attention_bias
        self.q_proj = nn.Linear(cfg.hidden_size, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.n_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.n_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, cfg.hidden_size, bias=cfg.attention_out_bias)
        # Qwen3: RMSNorm over each head's query and key (weights of size head_dim), before RoPE.
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps) if cfg.qk_norm else None

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        attn_mask: Tensor | JointMask | None,
        kv: LayerKV | None,
        kv_start: int,
    ) -> Tensor:
        batch, seq, _ = x.shape
        q = self.q_proj(x).view(batch, seq, self.n_heads, self.head_dim)
        k = self.k_proj(x).view(batch, seq, self.n_kv_heads, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = self.v_proj(x).view(batch, seq, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if kv is not None:
            # Write this pass's keys/values after the committed ones. Positions past what the engine
            # commits are scratch: the next pass overwrites them (that is how a noisy block is dropped).
            end = kv_start + seq
            kv.keys[:, :, kv_start:end] = k
            kv.values[:, :, kv_start:end] = v
            k, v = kv.keys[:, :, :end], kv.values[:, :, :end]
        is_causal = attn_mask is None and k.shape[2] == seq
        if attn_mask is None and not is_causal:
            raise ValueError("a pass over cached keys needs an explicit attention mask")
        out = attention(q, k, v, attn_mask, is_causal, expand_groups=q.is_cuda and attn_mask is not None)
        return self.o_proj(out.transpose(1, 2).reshape(batch, seq, self.n_heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        bias = cfg.mlp_bias  # Llama's mlp_bias; always off for Qwen
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=bias)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=bias)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, attn_mask, kv, kv_start):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, attn_mask, kv, kv_start)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    """Embeddings, decoder layers and the final norm (`model.*` in a Hugging Face checkpoint)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class CausalLM(nn.Module):
    """Decoder-only LM. `forward` returns final hidden states; `logits` applies the LM head.

    Keeping the two apart lets callers ask for logits only where they need them (the last prompt
    token, the masked positions of a block), and lets a fused LM-head kernel start from hidden states
    (parafill_kernels.lm_head_denoise_step: tested and benchmarked, not yet what the decoders call)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(
        self,
        input_ids: Tensor,
        positions: Tensor,
        attn_mask: Tensor | JointMask | None = None,
        kv: list[LayerKV] | None = None,
        kv_start: int = 0,
    ) -> Tensor:
        """Hidden states [batch, seq, hidden] for `input_ids` [batch, seq] at `positions` [batch, seq].

        attn_mask: bool, True = may attend; [seq, kv_start + seq] or [batch, 1, seq, kv_start + seq]; or the
        block-diffusion training input's JointMask. None means causal over this pass alone (AR training, or a
        prefill with nothing cached).
        kv: per-layer buffers; this pass's keys/values are written at [kv_start, kv_start + seq).
        """
        x = self.model.embed_tokens(input_ids)
        cos, sin = rope_cos_sin(positions, self.config.head_dim, self.config.rope_theta, x.dtype)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, attn_mask, None if kv is None else kv[i], kv_start)
        return self.model.norm(x)

    def logits(self, hidden: Tensor) -> Tensor:
        return self.lm_head(hidden)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
