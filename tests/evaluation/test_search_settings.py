"""A decoding that cannot make sense for the model it decodes is refused in the job too, where
the model's sizes are known (a hub checkpoint's vocabulary, a downloaded dataset's): one line
naming the run directory and the decode key."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nmtbench.errors import InputError
from nmtbench.evaluation.translate import search_settings
from nmtbench.workflow.decode_settings import DecodeSettings


def model(decoding: str) -> SimpleNamespace:
    """What the check reads of a model: how it decodes, its target vocabulary, its lengths."""
    return SimpleNamespace(decoding=decoding, tgt_vocab=SimpleNamespace(size=300),
                           **({"max_length": 255} if decoding == "nat" else {}))


@pytest.mark.parametrize("decoding, settings, message", [
    ("at", {"beam": 301}, "run: decode key 'beam' 301 is wider than the target vocabulary "
     "(300 tokens): every step would score beam x vocabulary = 90,300 candidates per sentence"),
    ("at", {"max_len_a": 0, "max_len_b": 0}, "run: decode keys 'max_len_a' and 'max_len_b' "
     "are both 0: every hypothesis would be empty"),
    ("nat", {"length_beam": 256}, "run: decode key 'length_beam' 256 is more than the 255 "
     "target lengths the model predicts"),
])
def test_a_search_that_cannot_make_sense_is_one_line(decoding, settings, message):
    with pytest.raises(InputError) as err:
        search_settings(model(decoding), DecodeSettings(**settings), "run")
    assert str(err.value) == message


@pytest.mark.parametrize("decoding, settings", [
    ("at", {"beam": 300}), ("at", {"max_len_a": 0, "max_len_b": 1}),
    ("nat", {"length_beam": 255, "max_len_a": 0, "max_len_b": 0}),  # no length cap in NAT
    ("nat", {"beam": 100000}),  # a beam mask-predict does not read
])
def test_the_search_settings_at_their_limits_decode(decoding, settings):
    assert search_settings(model(decoding), DecodeSettings(**settings), "run")
