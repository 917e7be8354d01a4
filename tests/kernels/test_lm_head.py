"""Fused LM-head + denoise step (hidden [N, D] x weight [V, D], no [N, V] logits in memory), in Triton's
CPU interpreter, against float64 logits."""

from __future__ import annotations

import pytest
import torch

from parafill_kernels import reference
from tests.kernels.conftest import Interpreted
from tests.kernels.oracle import check_tokens_are_argmax, confidence64


def inputs(n: int, v: int, d: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, d, generator=gen).to(dtype)
    weight = (torch.randn(v, d, generator=gen) * 0.4).to(dtype)
    return hidden, weight


def check(
    out: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    hidden: torch.Tensor,
    weight: torch.Tensor,
    masked: torch.Tensor,
    threshold: float,
    block_size: int | None,
    fallback: torch.Tensor | None,
    temperature: float = 0.0,
    seed: int | None = None,
) -> None:
    tokens, conf, commit = out
    n = hidden.shape[0]
    assert tokens.shape == conf.shape == commit.shape == (n,)
    assert tokens.dtype == torch.int64 and conf.dtype == torch.float32 and commit.dtype == torch.bool
    logits64 = hidden.double() @ weight.double().t()
    logits64 = logits64.masked_fill(logits64.isnan(), float("-inf"))  # the spec reads NaN as -inf
    scaled64 = logits64 * float(torch.tensor(1.0 / temperature)) if temperature > 0 else logits64
    # fp32 accumulation over D against float64: a few ulps of the logits
    torch.testing.assert_close(conf.double(), confidence64(scaled64), rtol=1e-5, atol=1e-6)
    values = scaled64
    if temperature > 0 and seed is not None:
        values = scaled64 + reference.gumbel_noise(tuple(scaled64.shape), seed, scaled64.device).double()
    picked = values.gather(1, tokens[:, None]).squeeze(1)
    assert torch.all(picked >= values.amax(dim=1) - 1e-4), "token is not (within rounding) the argmax"
    fb = masked if fallback is None else fallback
    assert torch.equal(commit, reference.select_commits(conf, masked, fb, threshold, block_size or n))
    ref_tokens, _, _ = reference.lm_head_denoise_step(
        hidden, weight, masked, threshold, block_size, fallback, temperature, seed
    )
    assert torch.equal(tokens, ref_tokens)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("temperature", "seed"), [(0.0, None), (0.8, 99)])
def test_lm_head_matches_float64(tdn: Interpreted, dtype: torch.dtype, temperature: float, seed: int | None) -> None:
    n, v, d = 8, 200, 80  # V and D not multiples of the 32-wide tiles; 8 rows padded to a 16-row MMA tile
    hidden, weight = inputs(n, v, d, dtype, seed=1)
    masked = torch.tensor([1, 0, 1, 1, 1, 1, 0, 1], dtype=torch.bool)
    fallback = masked & (torch.arange(n) % 4 == 0)
    out = tdn.lm_head_denoise_step(
        hidden, weight, masked, 0.3, 4, fallback, temperature, seed, block_v=32, block_d=32, tiles_per_split=2
    )
    check(out, hidden, weight, masked, 0.3, 4, fallback, temperature, seed)


def test_lm_head_row_tiles_and_strides(tdn: Interpreted) -> None:
    # 20 rows: two 16-row tiles, the second mostly padding; transposed weight view (stride(1) != 1).
    n, v, d = 20, 96, 40
    hidden, weight_t = inputs(n, d, v, torch.float32, seed=2)
    weight = weight_t.t()  # [V, D] with strides (1, V)
    hidden = hidden[:, :d]
    masked = torch.ones(n, dtype=torch.bool)
    out = tdn.lm_head_denoise_step(
        hidden, weight, masked, 0.5, 5, None, 0.0, None, block_v=32, block_d=16, tiles_per_split=1
    )
    check(out, hidden, weight, masked, 0.5, 5, None)


def test_lm_head_nan_logits_count_as_negative_infinity(tdn: Interpreted) -> None:
    n, v, d = 4, 96, 32
    hidden, weight = inputs(n, v, d, torch.float32, seed=5)
    weight[[3, 70]] = float("nan")  # two vocabulary rows whose logits are NaN for every position
    hidden[3] = float("nan")  # a position whose every logit is NaN
    masked = torch.ones(n, dtype=torch.bool)
    out = tdn.lm_head_denoise_step(hidden, weight, masked, 0.3, 2, block_v=32, block_d=16, tiles_per_split=1)
    check(out, hidden, weight, masked, 0.3, 2, None)
    tokens, conf, _ = out
    assert not set(tokens[:3].tolist()) & {3, 70} and tokens[3] == 0 and conf[3] == 0.0


def test_lm_head_mixed_dtypes_and_host_defaults(tdn: Interpreted) -> None:
    n, v, d = 4, 130, 64
    hidden, weight = inputs(n, v, d, torch.float32, seed=3)
    weight = weight.to(torch.bfloat16)  # fp32 hidden x bf16 weight: fp32 path
    masked = torch.tensor([1, 1, 0, 1], dtype=torch.bool)
    out = tdn.lm_head_denoise_step(hidden, weight, masked, 0.2, 2)
    check(out, hidden, weight, masked, 0.2, 2, None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_lm_head_ties_pick_lowest_index(tdn: Interpreted, dtype: torch.dtype) -> None:
    # Small integers: every logit is exact in fp32 whatever the summation order, so ties are real ties.
    gen = torch.Generator().manual_seed(4)
    n, v, d = 6, 150, 24
    hidden = torch.randint(-2, 3, (n, d), generator=gen).float()
    weight = torch.randint(-2, 3, (v, d), generator=gen).float()
    weight[[131, 70, 40, 33]] = weight[7] = hidden[0].sign() * 3  # row 0: best at 7, repeated later
    weight[100] = weight[99] = hidden[1].sign() * 3  # row 1: adjacent columns, same 32-wide tile
    hidden[2] = 0.0  # every logit 0: token 0, confidence 1/V
    hidden, weight = hidden.to(dtype), weight.to(dtype)
    masked = torch.ones(n, dtype=torch.bool)
    tokens, conf, _ = tdn.lm_head_denoise_step(
        hidden, weight, masked, 0.5, None, None, 0.0, None, block_v=32, block_d=16, tiles_per_split=2
    )
    check_tokens_are_argmax(tokens, hidden.double() @ weight.double().t())
    assert tokens[:3].tolist() == [7, 99, 0]
    torch.testing.assert_close(conf.double(), confidence64(hidden.double() @ weight.double().t()), rtol=1e-5, atol=1e-7)
