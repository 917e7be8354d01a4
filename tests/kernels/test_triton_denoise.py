"""Triton denoise_step (logits variant), run in Triton's CPU interpreter, against a float64 oracle.

Shapes are small (the interpreter executes every program in Python); tiles are shrunk instead so that
V is several tiles, not a multiple of the tile, and split over several programs per row.
"""

from __future__ import annotations

import pytest
import torch

from parafill_kernels import reference
from tests.kernels.conftest import Interpreted
from tests.kernels.oracle import check_step, random_logits

NEG = float("-inf")


def run(
    tdn: Interpreted,
    logits: torch.Tensor,
    masked: torch.Tensor,
    threshold: float,
    block_size: int | None,
    fallback: torch.Tensor | None = None,
    temperature: float = 0.0,
    seed: int | None = None,
    block_v: int = 128,
    n_splits: int | None = 3,
    combine_splits: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    out = tdn.denoise_step(
        logits,
        masked,
        threshold,
        block_size,
        fallback,
        temperature,
        seed,
        block_v=block_v,
        n_splits=n_splits,
        combine_splits=combine_splits,
    )
    check_step(out, logits, masked, threshold, block_size, fallback, temperature, seed)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_random_logits_match_float64(tdn: Interpreted, dtype: torch.dtype, temperature: float) -> None:
    gen = torch.Generator().manual_seed(1)
    logits = random_logits(8, 777, dtype, gen)  # 777 = 6 tiles of 128 + 9
    masked = torch.tensor([1, 1, 0, 1, 1, 1, 1, 0], dtype=torch.bool)
    fallback = masked & (torch.arange(8) % 4 < 2)
    _, conf, _ = run(tdn, logits, masked, 0.5, 4, fallback, temperature)
    assert conf.min() > 0.0 and conf.max() <= 1.0


def test_single_split_and_large_tile(tdn: Interpreted) -> None:
    gen = torch.Generator().manual_seed(2)
    logits = random_logits(4, 300, torch.float32, gen)
    masked = torch.ones(4, dtype=torch.bool)
    run(tdn, logits, masked, 0.3, None, block_v=512, n_splits=1)  # one tile, mostly past V
    run(tdn, logits, masked, 0.3, 2, block_v=64, n_splits=None)  # the host's own split choice


def test_ties_pick_lowest_index(tdn: Interpreted) -> None:
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(6, 700, generator=gen)
    top = 50.0
    logits[0, [640, 300, 5]] = top  # across splits: 5 wins
    logits[1, [10, 10 + 128, 10 + 256]] = top  # same lane, later tiles
    logits[2, [99, 40, 20]] = top  # same tile, different lanes
    logits[3, [699, 600]] = top  # only in the last split, last (partial) tile
    logits[4, :] = 1.5  # everything tied
    logits[5, [256, 129]] = top  # second tile's lanes vs third tile's first lane
    masked = torch.ones(6, dtype=torch.bool)
    tokens, _, _ = run(tdn, logits, masked, 0.9, None)
    assert tokens.tolist() == [5, 10, 20, 600, 0, 129]
    # 11 slices of 64 columns merged two at a time: ties between the combine kernel's loop steps.
    tokens, _, _ = run(tdn, logits, masked, 0.9, None, block_v=64, n_splits=11, combine_splits=2)
    assert tokens.tolist() == [5, 10, 20, 600, 0, 129]
    # bf16 rounding makes distinct fp32 values tie: still the lowest index.
    b = torch.randn(2, 300, generator=gen)
    b[0, 7], b[0, 200] = 10.0, 10.01  # equal after rounding to bf16
    b[1, 250], b[1, 3] = 9.99, 10.0
    tokens, _, _ = run(tdn, b.to(torch.bfloat16), torch.ones(2, dtype=torch.bool), 0.9, None)
    assert tokens.tolist() == [7, 3]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_negative_infinity(tdn: Interpreted, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(6, 500, generator=gen)
    logits[0] = NEG  # no probability mass: confidence 0, token 0
    logits[1, :400] = NEG  # the first splits see only -inf
    logits[2, :] = NEG
    logits[2, 333] = 2.0  # one finite logit: confidence 1
    logits[3, ::2] = NEG
    logits[4, 100:] = NEG  # the last splits see only -inf
    logits[5, 499] = NEG
    logits = logits.to(dtype)
    masked = torch.ones(6, dtype=torch.bool)
    for temperature, seed in [(0.0, None), (0.8, 11)]:
        tokens, conf, commit = run(tdn, logits, masked, 0.99, 3, None, temperature, seed)
        assert tokens[0] == 0 and conf[0] == 0.0
        assert tokens[2] == 333 and conf[2] == 1.0
        assert bool(tokens[1] >= 400) and bool(tokens[4] < 100)
        assert commit[2]


def test_all_negative_infinity_row_never_commits_by_threshold(tdn: Interpreted) -> None:
    logits = torch.full((2, 200), NEG)
    logits[1, 17] = 0.0
    masked = torch.ones(2, dtype=torch.bool)
    tokens, conf, commit = run(tdn, logits, masked, 0.5, 1, masked.clone().fill_(False))
    assert conf.tolist() == [0.0, 1.0] and commit.tolist() == [False, True] and tokens.tolist() == [0, 17]


def test_positive_infinity_like_reference(tdn: Interpreted) -> None:
    logits = torch.randn(2, 300, generator=torch.Generator().manual_seed(12))
    logits[0, 222] = float("inf")  # reference: softmax is nan -> confidence 0; token 222
    logits[1, [50, 260]] = float("inf")
    masked = torch.ones(2, dtype=torch.bool)
    got = tdn.denoise_step(logits, masked, 0.5, None, block_v=128, n_splits=3)
    want = reference.denoise_step(logits, masked, 0.5)
    assert got[0].tolist() == want[0].tolist() == [222, 50]
    assert got[1].tolist() == want[1].tolist() == [0.0, 0.0]
    assert torch.equal(got[2], want[2])


@pytest.mark.parametrize("n_splits", [1, 3])
def test_nan_logits_count_as_negative_infinity_however_the_vocabulary_is_split(tdn: Interpreted, n_splits: int) -> None:
    # A +inf logit on a banned token plus its -inf bias is NaN. Before NaN had a meaning, the kernel's
    # answer here depended on the tiling (confidence ~1 and a commit with 3 slices, 0 with 1).
    logits = torch.full((3, 300), -5.0)
    logits[:2, 100] = 10.0
    logits[0, 5] = logits[1, 250] = float("nan")
    logits[2] = float("nan")  # nothing but NaN: no probability mass at all
    masked = torch.ones(3, dtype=torch.bool)
    tokens, conf, commit = run(tdn, logits, masked, 0.9, None, masked.clone().fill_(False), n_splits=n_splits)
    assert tokens.tolist() == [100, 100, 0] and commit.tolist() == [True, True, False]
    assert conf[2] == 0.0 and conf[:2].min() > 0.99


def test_temperature_is_a_reciprocal_multiply(tdn: Interpreted) -> None:
    # a < b, but a * fp32(1/0.7) == b * fp32(1/0.7) in fp32 (a tie: the lower index wins) while a / 0.7 <
    # b / 0.7: pins the rounding that the kernels and the reference share.
    a = torch.tensor(6.91302490234375)
    b = torch.nextafter(a, torch.tensor(float("inf")))
    inv = torch.tensor(1.0 / 0.7, dtype=torch.float32)
    assert a * inv == b * inv and a / 0.7 < b / 0.7
    logits = torch.rand(1, 300, generator=torch.Generator().manual_seed(13))
    logits[0, 3], logits[0, 200] = a, b
    masked = torch.ones(1, dtype=torch.bool)
    tokens, _, _ = run(tdn, logits, masked, 0.5, None, None, 0.7)
    assert tokens.tolist() == [3] and reference.denoise_step(logits, masked, 0.5, None, None, 0.7)[0].tolist() == [3]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_magnitudes(tdn: Interpreted, dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(4, 400, generator=gen)
    logits[0, 300], logits[0, 301] = 1e4, 1e4 - 1.0  # exp(x) overflows fp32; differences do not
    logits[1] = -1e30
    logits[1, 123] = -1e30 + 1e25  # all tiny but finite
    logits[2, ::3] = -3e38
    logits[2, 250] = 60.0
    logits[3] = logits[3] * 1e4
    logits = logits.to(dtype)
    masked = torch.ones(4, dtype=torch.bool)
    for temperature in (0.0, 0.5, 2.0):
        tokens, conf, _ = run(tdn, logits, masked, 0.6, 2, None, temperature)
        assert tokens[0] == 300 and tokens[2] == 250
    assert torch.isfinite(conf).all()


def test_nothing_masked(tdn: Interpreted) -> None:
    gen = torch.Generator().manual_seed(6)
    logits = random_logits(8, 300, torch.float32, gen)
    masked = torch.zeros(8, dtype=torch.bool)
    _, _, commit = run(tdn, logits, masked, 0.0, 4, torch.ones(8, dtype=torch.bool))
    assert not commit.any()
    masked[5] = True  # block 0 has no work, block 1 one row
    _, _, commit = run(tdn, logits, masked, 2.0, 4, masked.clone())
    assert commit.tolist() == [False] * 5 + [True] + [False] * 2


def test_fallback_commits_most_confident_candidate(tdn: Interpreted) -> None:
    gen = torch.Generator().manual_seed(7)
    logits = random_logits(12, 260, torch.float32, gen)
    logits[4] = logits[6]  # equal confidences in block 1: the lower row wins
    logits[5] = logits[6] - 3.0  # same softmax, shifted logits: equal confidence
    masked = torch.ones(12, dtype=torch.bool)
    masked[8:] = torch.tensor([False, True, True, False])
    fallback = torch.zeros(12, dtype=torch.bool)
    fallback[[1, 2, 4, 5, 6, 8]] = True  # block 2's only candidate row (8) is not masked
    _, conf, commit = run(tdn, logits, masked, 1.5, 4, fallback)  # nothing passes a threshold above 1
    want = torch.zeros(12, dtype=torch.bool)
    best = 1 if conf[1] >= conf[2] else 2
    want[best] = True
    want[4 if conf[4] >= conf[6] else 6] = True
    assert torch.equal(commit, want)
    # fallback=None means every masked row is a candidate
    _, conf, commit = run(tdn, logits, masked, 1.5, 4, None)
    assert commit.view(3, 4).sum(dim=1).tolist() == [1, 1, 1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("temperature", "seed"), [(0.7, 1234), (1.0, 2**31 + 99), (1.6, 7)])
def test_sampling_identical_to_reference(tdn: Interpreted, dtype: torch.dtype, temperature: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(8)
    logits = (torch.randn(8, 333, generator=gen) * 0.5).to(dtype)  # flat: noise decides most rows
    masked = torch.ones(8, dtype=torch.bool)
    tokens, _, _ = run(tdn, logits, masked, 0.1, 4, None, temperature, seed)
    ref_tokens, _, _ = reference.denoise_step(logits, masked, 0.1, 4, None, temperature, seed)
    assert torch.equal(tokens, ref_tokens)
    greedy = logits.float().argmax(dim=-1)
    assert not torch.equal(tokens, greedy), "noise had no effect"
    again, _, _ = tdn.denoise_step(logits, masked, 0.1, 4, None, temperature, seed + 1, block_v=128, n_splits=3)
    assert not torch.equal(again, tokens), "seed had no effect"


def test_temperature_without_seed_is_greedy(tdn: Interpreted) -> None:
    gen = torch.Generator().manual_seed(9)
    logits = random_logits(4, 300, torch.float32, gen)
    masked = torch.ones(4, dtype=torch.bool)
    tokens, _, _ = run(tdn, logits, masked, 0.5, None, None, 0.9, None)
    assert torch.equal(tokens, logits.argmax(dim=-1))
    tokens, _, _ = run(tdn, logits, masked, 0.5, None, None, 0.0, 5)  # seed without temperature: greedy
    assert torch.equal(tokens, logits.argmax(dim=-1))


def test_gumbel_noise_is_bit_identical(tdn: Interpreted) -> None:
    for seed in (0, 1, 12345, 2**31 - 1, 2**31 + 5, 2**40 + 3):
        got = tdn.gumbel_noise(700, seed, torch.device("cpu"))
        want = reference.gumbel_noise((700,), seed, torch.device("cpu"))
        assert torch.equal(got, want), seed


def test_strided_rows_and_shape_errors(tdn: Interpreted) -> None:
    gen = torch.Generator().manual_seed(10)
    big = random_logits(4, 340, torch.float32, gen)
    logits = big[:, :301]  # row stride 340
    masked = torch.ones(4, dtype=torch.bool)
    run(tdn, logits, masked, 0.4, 2)
    with pytest.raises(ValueError, match="blocks of 3"):
        tdn.denoise_step(logits, masked, 0.4, 3)
    with pytest.raises(ValueError, match="blocks of 3"):
        reference.denoise_step(logits, masked, 0.4, 3)
    tokens, conf, commit = tdn.denoise_step(logits[:0], masked[:0], 0.4, None)
    assert tokens.shape == conf.shape == commit.shape == (0,)
