"""Beam search on a hand-built model whose next-token distributions are fixed tables.

Token ids: PAD 0, BOS 1, EOS 2, A 3, B 4. A source row's first id picks the table; the model's
state is the prefix fed so far, so every score below can be checked by hand.
"""

import dataclasses
import math
from typing import Any

import torch

from nmtbench.data.tokenization import Vocab
from nmtbench.parts.beam_search import beam_search
from nmtbench.parts.contract import Model

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4
VOCAB = Vocab(size=7, pad=PAD, bos=BOS, eos=EOS, unk=5, mask=6)  # unk, mask: unused here
V = 5
Table = dict[tuple[int, ...] | str, dict[int, float]]  # prefix (no BOS) -> probs; "*" = default

# Greedy takes A (0.6) and then must stop: A EOS = 0.6 * 0.45 = 0.27.
# Beam 2 also keeps B (0.39) and finds B EOS = 0.39 * 0.9 = 0.351 > 0.27.
# Step 2 of beam 2 ranks B·EOS 0.351, A·EOS 0.27, A·A 0.18, A·B 0.15: both EOS extensions rank in
# the top 2, so both finish and the sentence is done (same length, so no length penalty effect).
GREEDY_TRAP: Table = {
    (): {A: 0.6, B: 0.39, EOS: 0.01},
    (A,): {EOS: 0.45, A: 0.3, B: 0.25},
    (B,): {EOS: 0.9, A: 0.05, B: 0.05},
    "*": {EOS: 0.9, A: 0.05, B: 0.05},
}

# Beam 2 trace (cumulative probabilities; a step keeps the 4 best extensions):
#   step 1: A 0.5, B 0.49 (EOS 0.01 ranks 3rd, so does not finish)
#   step 2: B·B 0.441, A·EOS 0.3, A·A 0.125, A·B 0.075 -> A·EOS finishes (1 of 2); live B·B, A·A
#   step 3: B·B·B 0.3969, A·A·A 0.0625, A·A·B 0.06125, B·B·EOS 0.02205 -> none finishes
#   step 4: B·B·B·EOS 0.19845, B·B·B·A 0.119, ... -> finishes (2 of 2): done.
# Finished: "A" with log 0.3 = -1.2040 over length 2 (EOS counted),
#           "B B B" with log 0.19845 = -1.6172 over length 4.
#   fairseq lenpen 0: -1.2040 vs -1.6172 -> "A"
#   fairseq lenpen 1: -1.2040 / 2 = -0.6020 vs -1.6172 / 4 = -0.4043 -> "B B B"
#   gnmt lenpen 1: -1.2040 / (7/6) = -1.0320 vs -1.6172 / (9/6) = -1.0781 -> "A"
#   gnmt lenpen 1.25: -1.2040 / (7/6)^1.25 = -0.9930 vs -1.6172 / (9/6)^1.25 = -0.9742 -> "B B B"
#   fairseq lenpen 0.35: -1.2040 / 2^0.35 = -0.9446 vs -1.6172 / 4^0.35 = -0.9955 -> "A"; had the
#     length left EOS out it would be -1.2040 / 1 vs -1.6172 / 3^0.35 = -1.1010 -> "B B B".
SHORT_OR_LONG: Table = {
    (): {A: 0.5, B: 0.49, EOS: 0.01},
    (A,): {EOS: 0.6, A: 0.25, B: 0.15},
    (B,): {B: 0.9, EOS: 0.05, A: 0.05},
    (B, B): {B: 0.9, EOS: 0.05, A: 0.05},
    (B, B, B): {EOS: 0.5, A: 0.3, B: 0.2},
    "*": {A: 0.5, B: 0.49, EOS: 0.01},
}

# Always prefers A, so only the maximum length stops it.
NEVER_ENDS: Table = {"*": {A: 0.9, EOS: 0.06, B: 0.04}}

TABLES = {10: GREEDY_TRAP, 11: SHORT_OR_LONG, 12: NEVER_ENDS}


class TableModel(Model):
    """Log-probs looked up from TABLES by the source's first id and the prefix generated so far."""

    def __init__(self) -> None:
        super().__init__()
        self.batch_sizes: list[int] = []  # rows fed at each decode_step

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"table": src[:, 0], "prefix": src.new_empty(src.size(0), 0)}

    def decode_step(self, tokens: torch.Tensor, state: dict[str, Any]) -> torch.Tensor:
        self.batch_sizes.append(tokens.size(0))
        state["prefix"] = torch.cat([state["prefix"], tokens[:, None]], dim=1)
        out = torch.full((tokens.size(0), V), float("-inf"))
        for row, (table_id, prefix) in enumerate(zip(state["table"].tolist(),
                                                     state["prefix"].tolist(), strict=True)):
            table = TABLES[table_id]
            for tok, p in table.get(tuple(prefix[1:]), table["*"]).items():
                out[row, tok] = math.log(p)
        return out

    def reorder_state(self, state: dict[str, Any], index: torch.Tensor) -> dict[str, Any]:
        return {k: v.index_select(0, index) for k, v in state.items()}


def search(src: list[list[int]], **kw: Any) -> list[list[int]]:
    return beam_search(TableModel(), torch.tensor(src), vocab=VOCAB, **kw)


def test_beam_finds_what_greedy_misses() -> None:
    assert search([[10]], beam=1) == [[A]]
    assert search([[10]], beam=2) == [[B]]


def test_length_penalty_chooses_between_short_and_long() -> None:
    assert search([[11]], beam=2, lenpen=0.0) == [[A]]
    assert search([[11]], beam=2, lenpen=1.0) == [[B, B, B]]
    assert search([[11]], beam=2, lenpen=0.35) == [[A]]
    assert search([[11]], beam=2, lenpen=1.0, lenpen_form="gnmt") == [[A]]
    assert search([[11]], beam=2, lenpen=1.25, lenpen_form="gnmt") == [[B, B, B]]


def test_a_bos_that_is_also_the_eos_ends_the_hypothesis() -> None:
    """GPT-2's <|endoftext|> starts the target and ends it: BOS is never generated, except
    when it is the EOS."""
    assert beam_search(TableModel(), torch.tensor([[10]]), beam=2,
                       vocab=dataclasses.replace(VOCAB, bos=EOS)) == [[B]]


def test_batch_gives_each_sentence_its_own_answer() -> None:
    model = TableModel()
    src = torch.tensor([[10, PAD], [11, PAD]])
    out = beam_search(model, src, beam=2, vocab=VOCAB, lenpen=1.0)
    assert out == [[B], [B, B, B]]
    # Sentence 0 is done after step 2 and leaves the batch: 2 sentences x 2 beams, then 1 x 2.
    assert model.batch_sizes == [4, 4, 2, 2]


def test_max_length_per_sentence_counts_non_pad_source_tokens() -> None:
    # int(1.0 * src_len + 2): 3 non-pad tokens -> 5, 1 non-pad token -> 3; then EOS is forced.
    src = [[12, 5, 5, PAD, PAD], [12, PAD, PAD, PAD, PAD]]
    out = search(src, beam=1, max_len_a=1.0, max_len_b=2)
    assert out == [[A] * 5, [A] * 3]


def test_max_positions_caps_length() -> None:
    model = TableModel()
    model.max_positions = 3  # BOS + 2 tokens fill the positions; EOS is predicted at the last
    out = beam_search(model, torch.tensor([[12]]), beam=1, vocab=VOCAB)
    assert out == [[A, A]]


def weight_casts(decode, model: Model, shape: tuple[int, int]) -> tuple[int, int]:
    """(casts of tensors of `shape`, model calls) while `decode()` runs under CPU bf16 autocast."""
    from torch.profiler import profile

    calls = 0
    hooks = [getattr(model, name) for name in ("decode_step", "predict") if hasattr(model, name)]

    def counted(fn):
        def call(*args, **kwargs):
            nonlocal calls
            calls += 1
            return fn(*args, **kwargs)
        return call

    for fn in hooks:
        setattr(model, fn.__name__, counted(fn))
    with torch.autocast("cpu", dtype=torch.bfloat16), profile(record_shapes=True) as prof:
        decode()
    casts = [e for e in prof.events() if e.name == "aten::_to_copy" and e.input_shapes
             and tuple(e.input_shapes[0]) == shape]
    return len(casts), calls


def test_a_bf16_search_casts_each_weight_once_not_at_every_step() -> None:
    """Autocast caches its cast weights only outside inference mode: a search under autocast
    must not run in inference mode, or it casts every weight again at every step."""
    import dataclasses

    from tiny_checkpoints import BERT_VOCAB

    from nmtbench.methods import get_method
    from nmtbench.parts.mask_predict import mask_predict

    small = {"size": "tiny", "d_model": 16, "ffn_dim": 32, "n_heads": 2, "encoder_layers": 1,
             "decoder_layers": 1, "max_positions": 64}
    # the casts are counted by shape: a vocabulary larger than the most positions mask-predict
    # projects here (4 candidates x 64), so no (M, 16) batch of states has the weight's shape
    v = dataclasses.replace(BERT_VOCAB, size=300)
    src = torch.tensor([[10, 11, 12, 13, v.eos], [20, 21, v.eos, v.pad, v.pad]])
    torch.manual_seed(0)
    at = get_method("transformer").build({"method": "transformer", **small}, v, v)
    casts, steps = weight_casts(lambda: beam_search(
        at, src, beam=2, vocab=v, max_len_a=0, max_len_b=6), at,
        (v.size, 16))
    assert steps >= 3 and casts == 1, (steps, casts)  # the output projection, cast once
    nat = get_method("cmlm").build({"method": "cmlm", "decoding": "nat", **small}, v, v)
    casts, iterations = weight_casts(lambda: mask_predict(
        nat, src, length_beam=2, iterations=4, vocab=v),
        nat, (v.size, 16))
    assert iterations >= 2 and casts == 1, (iterations, casts)
