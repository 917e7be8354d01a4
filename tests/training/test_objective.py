"""The block-diffusion objective: who attends to whom, and which position predicts which token."""

from __future__ import annotations

import torch

from decoder.masks import JointMask, joint_training_mask, training_mask
from decoder.model import CausalLM
from decoder.training import objective as O
from decoder.training.sizes import model_config


def test_training_mask_small_case_by_hand() -> None:
    # L=4, blocks of 2: noisy rows 0-3, clean rows 4-7. 1 = may attend.
    expected = torch.tensor(
        [
            # noisy x_t        clean x_0
            [1, 1, 0, 0, 0, 0, 0, 0],  # noisy 0 (block 0): its own block only
            [1, 1, 0, 0, 0, 0, 0, 0],  # noisy 1 (block 0)
            [0, 0, 1, 1, 1, 1, 0, 0],  # noisy 2 (block 1): own block + clean block 0
            [0, 0, 1, 1, 1, 1, 0, 0],  # noisy 3 (block 1)
            [0, 0, 0, 0, 1, 0, 0, 0],  # clean 0: causal over clean only
            [0, 0, 0, 0, 1, 1, 0, 0],
            [0, 0, 0, 0, 1, 1, 1, 0],
            [0, 0, 0, 0, 1, 1, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(training_mask(4, 2), expected)


def test_the_joint_mask_is_the_training_mask_and_attends_the_same() -> None:
    for L, block in ((4, 2), (16, 4), (64, 8)):
        assert torch.equal(joint_training_mask(L, block).dense(), training_mask(L, block))
    # The model with the structured mask (the clean rows run as a causal pass) against the dense mask: the same
    # hidden states and the same gradients, grouped-query heads included.
    torch.manual_seed(0)
    model = CausalLM(model_config("tiny", 64))
    L, block = 32, 8
    ids = torch.randint(6, 64, (3, 2 * L))
    pos = torch.arange(L).repeat(2).expand(3, 2 * L)
    results = []
    for mask in (training_mask(L, block), joint_training_mask(L, block)):
        model.zero_grad()
        hidden = model(ids, pos, attn_mask=mask)
        hidden.square().mean().backward()
        results.append((hidden.detach(), [p.grad.clone() for p in model.parameters()]))
    (dense_h, dense_g), (joint_h, joint_g) = results
    assert model.config.num_key_value_heads < model.config.num_attention_heads
    torch.testing.assert_close(joint_h, dense_h, rtol=1e-5, atol=1e-6)
    for a, b in zip(joint_g, dense_g, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_diffusion_targets_follow_the_token_shift() -> None:
    # L=8, block 4. masked tokens: 1, 2, 4 (a block's first token), 7.
    masked = torch.tensor([[False, True, True, False, True, False, False, True]])
    sel = O.diffusion_targets(masked, 4)
    # Noisy output j predicts token j+1: scored j = 0 (->1), 1 (->2), 6 (->7). Token 4 starts block 1,
    # so it is predicted from the clean stream (output 3), never from the noisy output 3.
    assert sel.tolist() == [[True, True, False, False, False, False, True]]


def test_noise_uses_the_mask_token_and_clipped_rates() -> None:
    g = torch.Generator().manual_seed(0)
    x0 = torch.randint(10, 100, (64, 64), generator=g)
    for block in (4, 8, 16, 32):
        xt, masked = O.noise(x0, block, mask_id=5, generator=g)
        assert torch.equal(xt[masked], torch.full_like(xt[masked], 5))
        assert torch.equal(xt[~masked], x0[~masked])
        lo, hi = O.mask_rates(block)
        rate = masked.float().mean().item()
        expected = (1 - O.FULL_MASK_RATE) * (lo + hi) / 2 + O.FULL_MASK_RATE
        assert abs(rate - expected) < 0.05


class Probe(torch.nn.Module):
    """Records what the objective feeds the model and returns hidden states that encode the position."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.seen: dict = {}

    def forward(self, input_ids, positions, attn_mask=None):
        self.seen = {"ids": input_ids, "pos": positions, "mask": attn_mask}
        B, T = input_ids.shape
        return torch.arange(T, dtype=torch.float32).view(1, T, 1).expand(B, T, 1).clone().requires_grad_()

    def logits(self, hidden):
        # Row i of the flattened input gets a one-hot "logit" on token id i: so the CE says which hidden
        # row (input position) produced which prediction.
        return torch.nn.functional.one_hot(hidden[..., 0].long(), self.vocab).float() * 50


def test_one_forward_over_noisy_and_clean_with_shared_positions() -> None:
    L, block = 8, 4
    probe = Probe(vocab=64)
    # Targets chosen so that a hidden row j predicting token x0[j+1] is "right" iff x0[j+1] == j: clean row
    # L+j predicts with id L+j, noisy row j with id j.
    x0 = torch.tensor([[9, 0, 1, 2, 3, 4, 5, 6]])  # x0[t] = t-1 for t>0: noisy rows predict correctly
    out = O.block_diffusion_loss(probe, x0, block, mask_id=63, generator=torch.Generator().manual_seed(1))
    ids, pos, mask = probe.seen["ids"], probe.seen["pos"], probe.seen["mask"]
    assert ids.shape == (1, 2 * L) and torch.equal(ids[0, L:], x0[0])
    assert torch.equal(pos[0], torch.arange(L).repeat(2))
    assert isinstance(mask, JointMask) and torch.equal(mask.dense(), training_mask(L, block))
    # Every scored noisy prediction came from row t-1 of the noisy copy: loss ~0.
    assert out.n_masked > 0 and out.masked.item() < 1e-3
    # The clean stream predicts every token from rows L..2L-2, whose "logits" say L+j != x0[j+1]: loss big.
    assert out.ar.item() > 10


def test_ar_loss_is_plain_next_token() -> None:
    probe = Probe(vocab=16)
    x = torch.tensor([[9, 0, 1, 2, 3]])
    out = O.ar_loss(probe, x)
    assert probe.seen["mask"] is None and probe.seen["ids"].shape == (1, 5)
    assert out.loss.item() < 1e-3 and out.masked is None
