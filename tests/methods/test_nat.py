"""Non-autoregressive translation: the CMLM objective, mask-predict decoding, AB-Net's adapters
and frozen BERTs, and the parameter counts of AB-Net's Table 1."""

import pytest
import torch
import torch.nn.functional as F
from tiny_checkpoints import BERT_VOCAB, TINY, save_tiny_bert

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.evaluation.params import count_parameters
from nmtbench.methods.abnet import ABNet, CrossAttentionAdapter, FFNAdapter, adapter_layers
from nmtbench.methods.cmlm import CMLM, ConditionalMaskedLM, sample_masks, target_sequence
from nmtbench.methods.transformer import EncoderDecoder, TransformerDecoder
from nmtbench.parts.contract import Batch, Model
from nmtbench.parts.mask_predict import mask_predict

V = Vocab(size=12, pad=0, bos=2, eos=3, unk=1, mask=4)


# --- the masking schedule -------------------------------------------------------------------

def test_masking_schedule_is_uniform_over_1_to_n():
    torch.manual_seed(0)
    n, rows = 5, 20000
    content = torch.zeros(rows, n + 3, dtype=torch.bool)
    content[:, 1: n + 1] = True  # [BOS] y1..y5 [EOS] pad
    masked = sample_masks(content)
    assert not masked[~content].any()  # BOS, EOS and padding are never masked
    counts = torch.bincount(masked.sum(1), minlength=n + 1)
    assert counts[0] == 0  # at least one token
    freq = counts[1:].float() / rows
    assert torch.allclose(freq, torch.full((n,), 1 / n), atol=0.015), freq  # k ~ U{1..n}
    per_position = masked[:, 1: n + 1].float().mean(0)  # E[k]/n = 3/5 at every position
    assert torch.allclose(per_position, torch.full((n,), 0.6), atol=0.02), per_position


def test_masking_a_row_without_tokens_masks_nothing():
    content = torch.tensor([[False, True, True, False], [False, False, False, False]])
    masked = sample_masks(content)
    assert masked[1].sum() == 0 and 1 <= masked[0].sum() <= 2


# --- mask-predict on a hand-built model -----------------------------------------------------

class Scripted(Model):
    """Answers each `predict` call from a script: per call, {position: (token, prob)}; records
    the tokens it was given. Length log-probs are fixed per source row."""

    decoding = "nat"

    def __init__(self, length_lprobs: torch.Tensor, script: list[dict[int, tuple[int, float]]]):
        super().__init__()
        self.length_lprobs, self.script, self.calls = length_lprobs, script, []
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def encode(self, src):
        return {"length_lprobs": self.length_lprobs[: src.size(0)], "row": torch.arange(len(src))}

    def reorder_state(self, state, index):
        return {k: v.index_select(0, index) for k, v in state.items()}

    def predict(self, tokens, state, positions=None):
        self.calls.append(tokens.clone())
        answer = self.script[min(len(self.calls), len(self.script)) - 1]
        lprobs = torch.full((*tokens.shape, V.size), -20.0)
        for pos, (token, prob) in answer.items():
            lprobs[:, pos, token] = torch.tensor(prob).log()
        return lprobs if positions is None else lprobs[positions]


def lengths_first(*lengths: int, classes: int = 8) -> torch.Tensor:
    """Length log-probs ranking the given lengths first, in order."""
    lp = torch.full((1, classes), -30.0)
    for rank, n in enumerate(lengths):
        lp[0, n] = -1.0 - rank
    return lp


M, B, E = V.mask, V.bos, V.eos


def test_mask_predict_remasks_the_least_probable_tokens_and_stops_when_unchanged():
    script = [
        {1: (5, 0.9), 2: (6, 0.2), 3: (7, 0.8), 4: (8, 0.3)},  # iteration 0: every position
        {1: (10, 0.99), 2: (9, 0.95), 3: (9, 0.4), 4: (9, 0.6)},  # 1: re-masked 2, 3 and 4
        {2: (11, 0.99), 3: (9, 0.4), 4: (9, 0.6)},  # 2: re-masked 3 and 4; nothing changes
        {1: (11, 0.99), 2: (11, 0.99), 3: (11, 0.99), 4: (11, 0.99)},  # never reached
    ]
    model = Scripted(lengths_first(4), script)
    out = mask_predict(model, torch.tensor([[2, 5, 3]]), length_beam=1, iterations=4,
                       vocab=V)
    # n = |y| (T - t) / T re-masked: 3 at t=1 (the 0.2, 0.3 and 0.8 tokens), 2 at t=2
    assert [c.tolist() for c in model.calls] == [
        [[B, M, M, M, M, E]],
        [[B, 5, M, M, M, E]],
        [[B, 5, 9, M, M, E]],
    ]  # the third call leaves the tokens unchanged: no fourth iteration
    assert out == [[5, 9, 9, 9]]  # position 1 kept its first token (not re-masked)


def test_mask_predict_runs_at_most_t_iterations():
    changing = [{1: (5 + i % 2, 0.5), 2: (6, 0.5)} for i in range(6)]
    model = Scripted(lengths_first(2), changing)
    mask_predict(model, torch.tensor([[2, 5, 3]]), length_beam=1, iterations=3, vocab=V)
    assert len(model.calls) == 3


def test_mask_predict_picks_the_candidate_with_the_best_average_log_prob():
    # lengths 2 then 3 are proposed; length 3's tokens are more probable on average
    script = [{1: (5, 0.5), 2: (6, 0.5), 3: (7, 0.9)}]
    model = Scripted(lengths_first(2, 3), script)

    def with_length_3_better(tokens, state, positions=None):
        lprobs = Scripted.predict(model, tokens, state)
        lprobs[tokens[:, 3] != V.pad, 1:3] += 0.5  # length-3 rows: more confident
        return lprobs if positions is None else lprobs[positions]

    model.predict = with_length_3_better
    out = mask_predict(model, torch.tensor([[2, 5, 3]]), length_beam=2, iterations=1, vocab=V)
    assert model.calls[0].shape == (2, 5)  # both candidates in one batch, padded to length 3
    assert out == [[5, 6, 7]]


@pytest.mark.parametrize("lenpen, form, best", [(1.0, "fairseq", [5, 6, 7, 8]),
                                                 (1.1, "gnmt", [5, 6])])
def test_mask_predict_ranks_its_candidates_under_the_length_penalty(lenpen, form, best):
    """Lengths 2 and 4, their tokens at probability 0.5 and 0.6. Average log-prob:
    2 ln 0.5 / 2 = -0.693 < 4 ln 0.6 / 4 = -0.511, length 4 wins. AB-Net's GNMT penalty at 1.1:
    2 ln 0.5 / (7/6)^1.1 = -1.170 > 4 ln 0.6 / (9/6)^1.1 = -1.308, length 2 wins."""
    model = Scripted(lengths_first(2, 4), [])

    def predict(tokens, state, positions=None):
        lprobs = torch.full((*tokens.shape, V.size), -20.0)
        p = torch.where(tokens[:, 4] != V.pad, 0.6, 0.5).log()  # length-4 rows: 0.6
        for pos, token in zip((1, 2, 3, 4), (5, 6, 7, 8), strict=True):
            lprobs[:, pos, token] = p
        return lprobs if positions is None else lprobs[positions]

    model.predict = predict
    out = mask_predict(model, torch.tensor([[2, 5, 3]]), length_beam=2, iterations=1, vocab=V,
                       lenpen=lenpen, lenpen_form=form)
    assert out == [best]


def test_mask_predict_batches_sentences_of_different_lengths():
    lp = torch.cat([lengths_first(1), lengths_first(3)])
    model = Scripted(lp, [{1: (5, 0.9), 2: (6, 0.9), 3: (7, 0.9)}])
    out = mask_predict(model, torch.tensor([[2, 5, 3], [2, 6, 3]]), length_beam=1,
                       iterations=2, vocab=V)
    assert out == [[5], [5, 6, 7]]
    assert model.calls[0].tolist() == [[B, M, E, 0, 0], [B, M, M, M, E]]
    assert len(model.calls) == 2  # unchanged after the second iteration: both stop


# --- CMLM -----------------------------------------------------------------------------------

def batch() -> Batch:
    src = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 9, 3, 0]])
    tgt_in = torch.tensor([[2, 5, 6, 7, 8], [2, 9, 10, 0, 0]])
    tgt_out = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]])
    return Batch(src, tgt_in, tgt_out, torch.tensor([0, 1]))


def test_cmlm_length_target_is_the_number_of_target_tokens():
    torch.manual_seed(0)
    model = CMLM.build({"size": "tiny", "decoding": "nat"}, V, V).eval()
    b = batch()
    assert target_sequence(b, V.bos).tolist() == [[2, 5, 6, 7, 8, 3], [2, 9, 10, 3, 0, 0]]
    logits = model._length_logits(model.encoder(b.src).length)  # (B, L)
    # |y|, no BOS/EOS; the term is summed over the batch's sentences
    expected = F.cross_entropy(logits.float(), torch.tensor([4, 2]), reduction="sum")
    loss, losses = model.loss(b)
    assert losses.terms["length"].item() == pytest.approx(expected.item(), rel=1e-5)
    assert logits[:, 0].isinf().all()  # length 0 is never predicted
    # the length NLL weighs 0.1 against the masked tokens' loss, per masked token
    total = (losses.terms["tokens"] + 0.1 * losses.terms["length"]) / losses.ntokens
    torch.testing.assert_close(loss, total)
    lprobs = model.encode(b.src)["length_lprobs"]
    torch.testing.assert_close(lprobs, F.log_softmax(logits, dim=-1))


def test_cmlm_loss_counts_only_masked_tokens_and_decodes():
    torch.manual_seed(0)
    model = CMLM.build({"size": "tiny", "decoding": "nat"}, V, V)
    loss, losses = model.loss(batch())
    assert 2 <= losses.ntokens <= 6  # one to |y| per sentence
    loss.backward()
    assert model.encoder.embed_lengths.weight.grad is not None
    out = mask_predict(model, batch().src, length_beam=2, iterations=3, vocab=V)
    assert len(out) == 2 and all(1 <= len(h) <= model.max_length for h in out)
    assert model.training  # restored


def test_cmlm_rejects_autoregressive_decoding():
    with pytest.raises(InputError, match="decoding"):
        CMLM.build({"size": "tiny", "decoding": "at"}, V, V)


# --- AB-Net ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def berts(tmp_path_factory):
    root = tmp_path_factory.mktemp("berts")
    save_tiny_bert(root / "src", seed=1)
    save_tiny_bert(root / "tgt", seed=2)
    return {"src_bert": str(root / "src"), "tgt_bert": str(root / "tgt")}


def abnet(berts, **settings):
    cfg = {"size": "tiny", "decoding": "nat", "adapter_dim": 16, "dropout": 0.0, **berts,
           **settings}
    return ABNet.build(cfg, BERT_VOCAB, BERT_VOCAB, pretrained=berts)


def test_adapter_shapes():
    enc = FFNAdapter(32, 16)
    assert (enc.w1.weight.shape, enc.w2.weight.shape) == ((16, 32), (32, 16))
    assert enc.w1.bias is None and enc.w2.bias is None  # as the authors' code
    dec = CrossAttentionAdapter(32, 2, memory_dim=48, dropout=0.0, attention_dropout=0.0)
    assert dec.attn.q_proj.weight.shape == (32, 32) and dec.attn.k_proj.weight.shape == (32, 48)
    h, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 48)
    assert dec(h, memory, torch.ones(2, 1, 1, 7, dtype=torch.bool)).shape == (2, 5, 32)
    assert enc(h).shape == h.shape


def test_adapter_layer_specs():
    assert adapter_layers("all", 12, "k") == list(range(12))
    assert adapter_layers("top-6", 12, "k") == [6, 7, 8, 9, 10, 11]
    assert adapter_layers("none", 12, "k") == []
    assert adapter_layers([11, 6, 6], 12, "k") == [6, 11]
    for bad in ("top-13", [12], "half"):
        with pytest.raises(InputError, match="k"):
            adapter_layers(bad, 12, "k")


def test_abnet_places_adapters_where_asked(berts):
    model = abnet(berts, encoder_adapter_layers="top-1", decoder_adapter_layers=[0])
    assert list(model.encoder.adapters) == ["1"] and list(model.decoder.adapters) == ["0"]
    assert model.encoder.adapters["1"].w1.weight.shape == (16, TINY["hidden_size"])
    assert model.encoder.embed_lengths.weight.shape == (1024, TINY["hidden_size"])


def test_only_adapters_and_length_predictor_train(berts):
    torch.manual_seed(0)
    model = abnet(berts)
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all(".adapters." in n or "embed_lengths" in n for n in trained)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    assert any(n.startswith("encoder.bert.") for n in frozen)
    assert any(n.startswith("decoder.mlm.") for n in frozen)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    optimizer = torch.optim.Adam(model.trainable_parameters(), lr=1e-2)
    src = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 9, 3, 0]])
    tgt_out = torch.tensor([[11, 12, 13, 3], [14, 15, 3, 0]])
    tgt_in = torch.tensor([[2, 11, 12, 13], [2, 14, 15, 0]])
    for _ in range(3):
        loss, _ = model.loss(Batch(src, tgt_in, tgt_out, torch.tensor([0, 1])))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    for n, p in model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n
        else:
            assert not torch.equal(p, before[n]), n


def test_abnet_variants_train_what_they_should(berts):
    full = abnet(berts, freeze_bert=False)  # AB-Net FB: everything trains
    assert all(p.requires_grad for p in full.parameters())
    enc = abnet({"src_bert": berts["src_bert"]}, tgt_bert=None)  # AB-Net-Enc (NAT)
    assert isinstance(enc, ConditionalMaskedLM) and enc.decoding == "nat"
    assert isinstance(enc.decoder, TransformerDecoder) and not enc.decoder.causal
    assert all(p.requires_grad for p in enc.decoder.parameters())
    at = ABNet.build({"size": "tiny", "decoding": "at", "adapter_dim": 16, "tgt_bert": None,
                      "src_bert": berts["src_bert"]}, BERT_VOCAB, BERT_VOCAB, berts)
    assert isinstance(at, EncoderDecoder) and at.decoding == "at"
    assert isinstance(at.decoder, TransformerDecoder) and at.decoder.causal
    assert at.encoder.embed_lengths is None  # beam search: no LENGTH token
    assert not any(p.requires_grad for p in at.encoder.bert.parameters())
    assert all(p.requires_grad for p in at.decoder.parameters())
    scratch = abnet(berts, bert_init="random", freeze_bert=False)  # AB-Net SC
    loaded = abnet(berts)
    name = "encoder.bert.embeddings.word_embeddings.weight"
    assert not torch.equal(dict(scratch.named_parameters())[name],
                           dict(loaded.named_parameters())[name])
    with pytest.raises(InputError, match="freeze_bert"):
        abnet(berts, freeze_bert="embeddings")  # AB-Net freezes whole BERTs or nothing
    with pytest.raises(InputError, match="tgt_bert: null"):
        ABNet.build({"size": "tiny", "decoding": "at", **berts}, BERT_VOCAB, BERT_VOCAB, berts)


def test_bert_dropout_replaces_the_checkpoints_own_in_both_berts(berts):
    """Frozen BERTs run in train mode (the authors' code): with their own dropout (0.1 here)
    two passes differ; `bert_dropout: 0` makes them one."""
    ids = torch.tensor([[BERT_VOCAB.bos, 10, 11, BERT_VOCAB.eos]])
    for bert_dropout, same in ((None, False), (0.0, True)):
        model = abnet(berts, bert_dropout=bert_dropout).train()
        for bert in (model.encoder.bert, model.decoder.mlm.bert):
            a, b = (bert(input_ids=ids).last_hidden_state for _ in range(2))
            assert torch.equal(a, b) == same


# --- the paper's parameter counts (Table 1, WMT14 En-De; `paper_plan`: conftest.py) ---------

@pytest.mark.parametrize("experiment, paper", [
    ("transformer-base", 74e6), ("abnet-mask-predict", 75e6), ("abnet", 67e6)])
def test_trained_parameters_match_the_paper(paper_plan, experiment, paper):
    trained = count_parameters(paper_plan, "wmt14-en-de", experiment)["trained"]
    assert abs(trained - paper) / paper < 0.03, trained


def test_abnet_enc_trains_adapters_length_and_a_base_decoder(paper_plan):
    # 78M in the paper; the decoder size is not stated. Ours: AB-Net's encoder adapters and
    # length table (as in AB-Net's 66.9M) plus a Transformer-base decoder over BERT's 768-wide
    # output and its 30k x 512 embeddings.
    counts = {e: count_parameters(paper_plan, "wmt14-en-de", e)["trained"]
              for e in ("abnet", "abnet-enc-nat")}
    adapters = 12 * (2 * 768 + 2 * 768 * 2048) + 1024 * 768
    cross_attention = 2 * (512 * 512 + 512) + 2 * (768 * 512 + 512)
    layer = 4 * (512 * 512 + 512) + cross_attention + (2 * 512 * 2048 + 2048 + 512) + 3 * 1024
    assert counts["abnet-enc-nat"] == adapters + 6 * layer + 30000 * 512
    assert counts["abnet"] == adapters + 12 * (4 * (768 * 768 + 768) + 2 * 768)
