"""Deep fusion (`nmtbench/methods/deep_fusion.py`) beyond the method contract: the partition of the
four tasks, the layer-wise attention, the grouping of the PTM's layers, TSP's synthetic negatives
and the settings it refuses."""

from __future__ import annotations

import pytest
import torch
from tiny_checkpoints import BERT_VOCAB, save_tiny_bert, save_tiny_gpt2

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.methods import get_method
from nmtbench.methods.deep_fusion import bag_of_words, bert_masking, corrupt, tsp_negatives
from nmtbench.parts.contract import Batch

SMALL = {"size": "tiny", "d_model": 16, "ffn_dim": 32, "n_heads": 2, "dropout": 0.0,
         "max_positions": 64}


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("deep_fusion") / "bert"
    save_tiny_bert(path, seed=7)  # 2 layers
    return str(path)


def deep_fusion(bert: str, **settings) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = {**SMALL, "src_bert": bert, "group_size": 1, "decoder_layers": 2, **settings}
    return get_method("deep-fusion").build(cfg, BERT_VOCAB, BERT_VOCAB,
                                           pretrained={"src_bert": bert})


def batch() -> Batch:
    v = BERT_VOCAB
    src = torch.tensor([[v.bos, 10, 11, 12, v.eos], [v.bos, 20, 21, v.eos, v.pad],
                        [v.bos, 30, v.eos, v.pad, v.pad]])
    tgt_in = torch.tensor([[v.bos, 40, 41, 42], [v.bos, 50, 51, v.pad], [v.bos, 60, v.pad, v.pad]])
    tgt_out = torch.tensor([[40, 41, 42, v.eos], [50, 51, v.eos, v.pad], [60, v.eos, v.pad, v.pad]])
    return Batch(src, tgt_in, tgt_out, torch.arange(3))


# The parts each named loss term may move: the paper's Figure 2 ("length", NAT's, is part of
# the translation loss). The PTM is the BERT with its masked-LM head and the LENGTH token it
# reads; TSP's projection g (and its map of target words) belong to the coordinator; the length
# table the LENGTH state is scored against is the decoder's.
PARTITION: dict[str, set[str]] = {
    "tokens": {"decoder", "coordinator"},
    "length": {"decoder", "coordinator"},
    "twp": {"coordinator", "ptm"},
    "tsp": {"coordinator", "ptm"},
    "mlm": {"ptm"},
}


def part_of(name: str) -> str:
    """The part ("ptm", "coordinator", "decoder") a parameter of the model belongs to."""
    if name.startswith(("encoder.mlm.", "encoder.length_token")):
        return "ptm"
    if name.startswith(("encoder.coordinator.", "tsp_")):
        return "coordinator"
    return "decoder"  # the decoder and the length table it is scored against


def parts_moved_by_each_loss(model) -> dict[str, set[str]]:
    """For each named loss alone: the parts whose parameters one Adam step on it moves."""
    names = dict(model.named_parameters())
    moved = {}
    torch.manual_seed(1)
    terms = model.losses(batch()).terms
    for term in terms:
        model.zero_grad()
        before = {n: p.detach().clone() for n, p in names.items()}
        optimiser = torch.optim.Adam([p for p in names.values() if p.requires_grad], lr=1e-2)
        torch.manual_seed(1)
        model.losses(batch()).terms[term].backward()
        optimiser.step()
        moved[term] = {part_of(n) for n, p in names.items()
                       if not torch.equal(p.detach(), before[n])}
        with torch.no_grad():
            for n, p in names.items():
                p.copy_(before[n])
    return moved


@pytest.mark.parametrize("decoding", ["at", "nat"])
def test_each_loss_moves_only_its_partition(bert, decoding):
    model = deep_fusion(bert, decoding=decoding).train()
    moved = parts_moved_by_each_loss(model)
    expected = {"tokens", "twp", "tsp", "mlm"} | ({"length"} if decoding == "nat" else set())
    assert set(moved) == expected
    for term, parts in moved.items():
        assert parts == PARTITION[term], (term, parts)


def test_without_the_partition_translation_moves_the_ptm_too(bert):
    moved = parts_moved_by_each_loss(deep_fusion(bert, partitioned=False).train())
    assert moved["tokens"] == {"decoder", "coordinator", "ptm"}
    # TWP and TSP read the decoder's target embeddings, now not held fixed
    assert "decoder" in moved["twp"] and "decoder" in moved["tsp"]


def test_a_frozen_ptm_is_moved_by_no_task(bert):
    model = deep_fusion(bert, freeze_ptm=True).train()
    moved = parts_moved_by_each_loss(model)
    assert "mlm" not in moved  # nothing left for it to train
    assert all("ptm" not in parts for parts in moved.values())
    assert not any(p.requires_grad for p in model.encoder.mlm.parameters())


def test_only_the_named_losses_are_trained(bert):
    model = deep_fusion(bert, losses=["t", "twp"]).train()
    assert set(model.losses(batch()).terms) == {"tokens", "twp"}
    assert not hasattr(model, "tsp_project")  # no TSP heads to train
    assert not model.encoder.mlm.cls.predictions.bias.requires_grad


def test_validation_scores_translation_only(bert):
    """The validation loss picks the best checkpoint: the tasks' random masks and negatives
    would make it noisy."""
    model = deep_fusion(bert).eval()
    with torch.no_grad():
        losses = model.losses(batch())
    assert set(losses.terms) == {"tokens"}


def test_layer_wise_attention_sums_to_one_per_decoder_layer(bert):
    model = deep_fusion(bert).eval()
    with torch.no_grad():
        states, keep = model.encoder.run(batch().src)
        groups = model.encoder.grouped(states)
        pooled = torch.stack([h.mean(1) for h in (model.encoder.coordinator.group(n, g)
                                                  for n, g in enumerate(groups))], dim=1)
        alpha = model.encoder.coordinator.attention(pooled)
    assert alpha.shape == (3, 2, 2)  # (B, decoder layers, groups)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(3, 2))
    assert float(alpha.min()) > 0


def test_with_one_layer_per_group_each_decoder_layer_has_its_own_group(bert):
    """M = 1: N groups of one PTM layer, one aggregation each; a change to PTM layer k's
    output changes group k's aggregation alone."""
    model = deep_fusion(bert, group_size=1, decoder_layers=2).eval()
    encoder = model.encoder
    assert len(encoder.coordinator.aggregate) == len(model.decoder.layers) == 2
    with torch.no_grad():
        states, _ = encoder.run(batch().src)
        groups = encoder.grouped(states)
        assert [len(g) for g in groups] == [1, 1]
        changed = [states[0], states[1] + 1.0]
        for n in range(2):
            same = torch.equal(encoder.coordinator.group(n, encoder.grouped(states)[n]),
                               encoder.coordinator.group(n, encoder.grouped(changed)[n]))
            assert same == (n == 0)
        # every decoder layer cross-attends its own coordinated representation
        encoded = encoder(batch().src)
        assert not torch.equal(encoded.context["coordinated0"], encoded.context["coordinated1"])
        memories = [layer.memory_state(encoded)["k"] for layer in model.decoder.layers]
        expected = [layer.cross_attn.kv(encoded.context[f"coordinated{n}"])[0]
                    for n, layer in enumerate(model.decoder.layers)]
        for got, want in zip(memories, expected, strict=True):
            torch.testing.assert_close(got, want)


def test_two_layers_per_group_make_one_group(bert):
    model = deep_fusion(bert, group_size=2, decoder_layers=1)
    states, _ = model.encoder.run(batch().src)
    assert [len(g) for g in model.encoder.grouped(states)] == [2]


def test_synthetic_negatives_differ_in_about_half_of_the_words():
    vocab = Vocab(size=1000, pad=0, bos=2, eos=3, unk=1, mask=4)
    generator = torch.Generator().manual_seed(0)
    words = torch.randint(5, 1000, (400, 20), generator=generator)
    target = torch.cat([words, torch.full((400, 1), vocab.eos)], dim=1)
    content = target != vocab.eos
    negatives = corrupt(target, content, vocab, generator)
    changed = []
    for row, negative in zip(target.tolist(), negatives.tolist(), strict=True):
        negative = [t for t in negative if t != vocab.pad]
        assert negative != row
        assert negative[-1] == vocab.eos  # only words are touched
        # word positions whose token is not the original one (deleted ones shift the rest,
        # so compare as multisets plus order: count the positions of row that are unchanged)
        kept = sum(a == b for a, b in zip(row, negative, strict=False))
        changed.append(1 - kept / 20)
    share = sum(changed) / len(changed)
    assert 0.4 < share < 0.9, share  # half chosen; a deletion shifts what follows it


def test_each_corruption_touches_half_of_the_words():
    """Without deletions the changed positions are exactly the chosen half (a swap of two
    equal words would change nothing, so the words are distinct)."""
    vocab = Vocab(size=1000, pad=0, bos=2, eos=3, unk=1, mask=4)
    generator = torch.Generator().manual_seed(3)
    target = torch.arange(10, 30)[None].repeat(300, 1)
    negatives = corrupt(target, torch.ones_like(target, dtype=torch.bool), vocab, generator)
    same_length = [n for n in negatives.tolist() if vocab.pad not in n]
    assert same_length  # rows without a deletion
    for row in same_length:
        assert sum(a != b for a, b in zip(row, range(10, 30), strict=True)) == 10


def test_twp_scores_the_targets_bag_of_words_each_word_once(bert):
    """Eq. 15's y_bow is an unordered set of the target's words: a repeated word counts once,
    EOS and padding not at all."""
    v = BERT_VOCAB
    target = torch.tensor([[40, 41, 40, v.eos], [50, v.eos, v.pad, v.pad]])
    bag = bag_of_words(target, v, v.size)
    assert [row.nonzero().flatten().tolist() for row in bag] == [[40, 41], [50]]
    model = deep_fusion(bert, losses=["t", "twp"]).train()
    pooled, top_group = [], model.top_group
    model.top_group = lambda *args: pooled.append(top_group(*args)) or pooled[-1]
    b = batch()
    b.tgt_out[0, 2] = 40  # the first target repeats a word: 40 41 40 [SEP]
    losses = model.losses(b)
    with torch.no_grad():
        logits = torch.nn.functional.linear(model.encoder.coordinator.map(pooled[0]),
                                            model.decoder.embed.weight)
        lprobs = logits.log_softmax(-1)
    by_hand = -(lprobs[0, [40, 41]].sum() + lprobs[1, [50, 51]].sum() + lprobs[2, 60])
    torch.testing.assert_close(losses.terms["twp"].detach(), by_hand)


@pytest.mark.parametrize("size", [1, 2, 5, 8])
def test_tsp_gives_each_source_b_negatives_half_in_batch_half_synthetic(size):
    allowed = tsp_negatives(size, generator=torch.Generator().manual_seed(size))
    for i, row in enumerate(allowed):
        in_batch, synthetic = row[:size].nonzero().flatten(), row[size:].nonzero().flatten()
        assert len(in_batch) == size // 2 and len(synthetic) == size - size // 2
        assert i not in in_batch.tolist()  # the target is not its own negative
        assert i in synthetic.tolist()  # its own target's corruption always is


def test_tsp_reads_a_target_in_the_ptms_vocabulary_by_its_ids(bert):
    """Both sides in the PTM's vocabulary: g(y) is the PTM reading [CLS] y [SEP] as it reads
    a source, with no map of its own; a target of its own vocabulary needs one."""
    shared = deep_fusion(bert, d_model=32, ffn_dim=64, vocabulary="tiny",
                         share_embeddings=True).eval()
    assert not hasattr(shared, "tsp_embed") and hasattr(deep_fusion(bert), "tsp_embed")
    b = batch()
    with torch.no_grad():
        as_source = torch.cat([b.tgt_in[:, :1], b.tgt_out], 1)  # [CLS] y [SEP]
        states, keep = shared.encoder.run(as_source)
        g_source = shared.tsp_project(shared.top_group(states, keep))
        torch.testing.assert_close(shared.sentence_vectors(b.tgt_out), g_source)


def test_mlm_masks_only_word_pieces():
    vocab = BERT_VOCAB
    src = batch().src
    torch.manual_seed(0)
    for _ in range(20):
        noisy, chosen = bert_masking(src, vocab, 0.5)
        specials = (src == vocab.bos) | (src == vocab.eos) | (src == vocab.pad)
        assert chosen.any() and not (chosen & specials).any()
        assert torch.equal(noisy[specials], src[specials])


@pytest.mark.parametrize("settings, message", [
    ({"group_size": 2, "decoder_layers": 2}, "one group of group_size layers per decoder"),
    ({"group_size": 3, "decoder_layers": 1}, "one group of group_size layers per decoder"),
    ({"losses": ["twp", "mlm"]}, "the translation loss t"),
    ({"losses": ["t", "bow"]}, "the translation loss t"),
    ({"decoding": "ctc"}, "decodes with at or nat"),
    ({"decoder_init": "gpt"}, "checkpoint .gpt. is not on disk"),
    ({"src_bert": None}, "needs `src_bert`"),
])
def test_bad_settings_are_one_line_errors(bert, settings, message):
    with pytest.raises(InputError, match=message) as error:
        deep_fusion(bert, **settings)
    assert "\n" not in str(error.value)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("deep_fusion") / "gpt2"
    save_tiny_gpt2(path, seed=3)
    return str(path)


def with_decoder(bert: str, decoder: str, **settings) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = {**SMALL, "src_bert": bert, "group_size": 1, "decoder_layers": 2,
           "decoder_init": decoder, **settings}
    return get_method("deep-fusion").build(cfg, BERT_VOCAB, BERT_VOCAB,
                                           pretrained={"src_bert": bert, "decoder_init": decoder})


def test_a_gpt2_decoder_computes_what_gpt2_does(bert, gpt2):
    """Table 5: the decoder takes GPT-2's shape (pre-norm, GELU) and weights; with its new
    cross-attentions silenced it is GPT-2 itself."""
    from transformers import GPT2Model

    model = with_decoder(bert, gpt2).eval()
    decoder = model.decoder
    assert (decoder.embed.embedding_dim, len(decoder.layers)) == (32, 2)
    with torch.no_grad():
        for layer in decoder.layers:
            layer.cross_attn.out_proj.weight.zero_()
            layer.cross_attn.out_proj.bias.zero_()
        tokens = batch().tgt_in
        ours = decoder.states(tokens, model.encoder(batch().src))
        theirs = GPT2Model.from_pretrained(gpt2).eval()(tokens).last_hidden_state
    real = tokens != BERT_VOCAB.pad
    torch.testing.assert_close(ours[real], theirs[real], rtol=1e-4, atol=1e-5)


def test_a_bert_decoder_takes_the_berts_weights_and_input(bert):
    from transformers import BertModel

    model = with_decoder(bert, bert).eval()
    source = BertModel.from_pretrained(bert, add_pooling_layer=False).eval()
    decoder = model.decoder
    layer, theirs = decoder.layers[1], source.encoder.layer[1]
    assert torch.equal(layer.self_attn.k_proj.weight, theirs.attention.self.key.weight)
    assert torch.equal(layer.ffn.fc2.bias, theirs.output.dense.bias)
    assert torch.equal(layer.ffn_norm.weight, theirs.output.LayerNorm.weight)
    assert layer.ffn.activation == "gelu" and not decoder.layers[0].pre_norm
    with torch.no_grad():  # BERT's own input: embeddings + positions + type 0, its LayerNorm
        tokens = batch().tgt_in
        torch.testing.assert_close(decoder.embedder(decoder.embed, tokens),
                                   source.embeddings(input_ids=tokens))


def test_a_frozen_decoder_trains_only_its_cross_attentions(bert, gpt2):
    model = with_decoder(bert, gpt2, freeze_decoder=True)
    trained = {n for n, p in model.decoder.named_parameters() if p.requires_grad}
    assert trained and all(".cross_attn" in n for n in trained)
    moved = parts_moved_by_each_loss(model.train())
    assert moved["tokens"] == {"decoder", "coordinator"}  # the cross-attentions are decoder


@pytest.mark.parametrize("settings, message", [
    ({"decoder_layers": 3, "group_size": 1}, "one group of group_size layers per decoder"),
    ({"freeze_decoder": True, "decoder_init": None}, "freeze_decoder needs decoder_init"),
])
def test_bad_decoder_settings_are_one_line_errors(bert, settings, message):
    with pytest.raises(InputError, match=message):
        with_decoder(bert, bert, **settings)


# --- Table 1's parameter counts on the paper config (`paper_plan`: conftest.py) --------------

@pytest.mark.parametrize("experiment, paper", [
    ("deepfusion-transformer-base", 62e6), ("deepfusion-transformer-big", 207e6),
    ("deepfusion-transformer-12", 123e6), ("deepfusion-transformer-20", 159e6)])
def test_the_baselines_have_table_1s_parameters(paper_plan, experiment, paper):
    """One joint 32k vocabulary with shared embeddings, FFN 1536 at d_model 768
    (docs/papers/deepfusion2022.md)."""
    from nmtbench.evaluation.params import count_parameters

    total = count_parameters(paper_plan, "wmt14-en-de", experiment)["total"]
    assert abs(total - paper) / paper < 0.05, total


def test_deep_fusion_has_table_1s_parameters_with_mbert_trimmed_and_shared(paper_plan):
    """mBERT trimmed to 30k pieces and shared with the target: 174.1M against 171M
    (docs/papers/deepfusion2022.md)."""
    from nmtbench.evaluation.params import count_parameters

    total = count_parameters(paper_plan, "wmt14-en-de", "deepfusion-m2")["total"]
    assert abs(total - 171e6) / 171e6 < 0.05, total


def test_shared_ptm_embeddings_are_the_decoders_and_need_its_vocabulary(bert):
    model = deep_fusion(bert, d_model=32, ffn_dim=64, vocabulary="tiny", share_embeddings=True)
    table = model.encoder.mlm.get_input_embeddings()
    assert model.decoder.embed is table
    with pytest.raises(InputError, match="share_embeddings needs the target to read"):
        deep_fusion(bert, d_model=32, ffn_dim=64, share_embeddings=True)
    with pytest.raises(InputError, match="PTM's width 32 is not the decoder's d_model 16"):
        deep_fusion(bert, vocabulary="tiny", share_embeddings=True)


def test_shared_embeddings_need_one_vocabulary():
    other = Vocab(size=BERT_VOCAB.size + 1, pad=0, bos=2, eos=3, unk=1, mask=4)
    build = get_method("transformer").build
    with pytest.raises(InputError, match="share_embeddings needs one vocabulary"):
        build({**SMALL, "share_embeddings": True, "vocabulary": "joint"}, BERT_VOCAB, other)
    with pytest.raises(InputError, match="share_embeddings needs one vocabulary"):
        build({**SMALL, "share_embeddings": True}, BERT_VOCAB, BERT_VOCAB)
    model = build({**SMALL, "share_embeddings": True, "vocabulary": "joint"}, BERT_VOCAB,
                  BERT_VOCAB)
    assert model.encoder.embed is model.decoder.embed
    separate = build(SMALL, BERT_VOCAB, BERT_VOCAB)
    saved = BERT_VOCAB.size * SMALL["d_model"]
    assert separate.num_params()["total"] - model.num_params()["total"] == saved
