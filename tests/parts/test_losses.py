"""fairseq's label-smoothed cross-entropy on a case worked out by hand."""

import math

import pytest
import torch

from nmtbench.parts.losses import label_smoothed_nll

# One distribution over V = 4 classes, p = (0.1, 0.2, 0.3, 0.4).
P = torch.tensor([0.1, 0.2, 0.3, 0.4])
# smooth = -sum_v log p_v = 2.302585 + 1.609438 + 1.203973 + 0.916291 = 6.032287
SMOOTH = 6.032287


def test_hand_computed_case() -> None:
    # epsilon = 0.3, V = 4: eps_i = 0.3 / 3 = 0.1, the gold weight is 1 - 0.3 - 0.1 = 0.6.
    # Row 1, target 2: nll = -log 0.3 = 1.203973; loss = 0.6 * 1.203973 + 0.1 * 6.032287 = 1.325612
    #   (the same as the cross-entropy against q = (0.1, 0.1, 0.7, 0.1):
    #    0.1*2.302585 + 0.1*1.609438 + 0.7*1.203973 + 0.1*0.916291 = 1.325612).
    # Row 2, target 3: nll = -log 0.4 = 0.916291; loss = 0.6 * 0.916291 + 0.603229 = 1.153003.
    lprobs = P.log().repeat(2, 1)  # (2, 4)
    loss, nll = label_smoothed_nll(lprobs, torch.tensor([2, 3]), epsilon=0.3, ignore_index=0)
    assert nll.item() == pytest.approx(1.203973 + 0.916291, abs=1e-5)
    assert loss.item() == pytest.approx(1.325612 + 1.153003, abs=1e-5)
    assert -P.log().sum().item() == pytest.approx(SMOOTH, abs=1e-5)


def test_no_smoothing_is_plain_nll() -> None:
    lprobs = P.log()[None]  # (1, 4)
    loss, nll = label_smoothed_nll(lprobs, torch.tensor([1]), epsilon=0.0, ignore_index=0)
    assert loss.item() == pytest.approx(-math.log(0.2), abs=1e-6)
    assert nll.item() == pytest.approx(-math.log(0.2), abs=1e-6)


def test_ignored_positions_contribute_nothing() -> None:
    # Row 2 is padding; its lprobs even hold -inf, which must not leak in as inf or nan.
    lprobs = torch.stack([P.log(), torch.tensor([0.0, float("-inf"), -1.0, -2.0])])  # (2, 4)
    loss, nll = label_smoothed_nll(lprobs, torch.tensor([2, 0]), epsilon=0.3, ignore_index=0)
    assert nll.item() == pytest.approx(1.203973, abs=1e-5)
    assert loss.item() == pytest.approx(1.325612, abs=1e-5)
