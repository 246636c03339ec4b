"""bert-init and bert-frozen: BERT weights loaded from a saved directory, what trains and what
stays frozen under an optimizer, both output modes, decoding hooks and bad settings."""

import pytest
import torch
import torch.nn.functional as F
from tiny_checkpoints import BERT_VOCAB, save_tiny_bert
from torch import nn

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.methods import get_method
from nmtbench.methods.bert_encoder import BertFrozen, BertInit
from nmtbench.parts.contract import Batch

TGT = Vocab(size=23, pad=0, bos=1, eos=2, unk=3, mask=4)
# decoder narrower (16) than the BERT (32): cross-attention projects the BERT width
SMALL = {"size": "tiny", "d_model": 16, "ffn_dim": 24, "n_heads": 2, "decoder_layers": 2,
         "dropout": 0.0}


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """(directory, the BertForMaskedLM saved there)."""
    out = tmp_path_factory.mktemp("bert")
    return str(out), save_tiny_bert(out, mlm=True, seed=7)  # build() seeds 0


def build(method, bert, weights=True, **cfg):
    torch.manual_seed(0)
    # the config names a hub checkpoint; `pretrained` says where it is on disk and must win
    return get_method(method).build({**SMALL, "src_bert": "bert-base-uncased", **cfg},
                                    BERT_VOCAB, TGT, pretrained={"src_bert": bert[0]},
                                    weights=weights)


def batch():
    src = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 20, 21, 3, 0, 0], [2, 30, 3, 0, 0, 0]])
    torch.manual_seed(1)
    tgt_out = torch.randint(5, TGT.size, (3, 5))
    tgt_out[:, -1] = TGT.eos
    tgt_out[2, 3:] = TGT.pad
    tgt_out[2, 2] = TGT.eos
    tgt_in = torch.cat([torch.full((3, 1), TGT.bos), tgt_out[:, :-1]], dim=1)
    tgt_in[2, 3:] = TGT.pad
    return Batch(src, tgt_in, tgt_out, torch.arange(3))


def test_bert_methods_read_cls_and_have_no_src_bos_setting(bert):
    assert build("bert-init", bert).source_bos and build("bert-frozen", bert).source_bos
    assert "src_bos" not in BertInit.settings.keys()


def test_registry():
    """Both methods are registered under their config names."""
    assert get_method("bert-init") is BertInit and get_method("bert-frozen") is BertFrozen


def test_bert_init_encoder_has_the_saved_weights(bert):
    """bert-init's encoder is the saved BERT, weight for weight (weights=False: random)."""
    saved = bert[1].bert.state_dict()
    loaded = build("bert-init", bert).encoder.bert.state_dict()
    assert loaded.keys() == saved.keys()
    assert all(torch.equal(loaded[k], saved[k]) for k in saved)
    fresh = build("bert-init", bert, weights=False).encoder.bert.state_dict()
    assert not torch.equal(fresh["embeddings.word_embeddings.weight"],
                           saved["embeddings.word_embeddings.weight"])


@pytest.mark.parametrize("method, cfg, frozen", [
    ("bert-frozen", {}, lambda n: n.startswith("encoder.bert.")),
    ("bert-init", {"freeze_bert": "below-top-1"},
     lambda n: n.startswith("encoder.bert.")
     and not n.startswith("encoder.bert.encoder.layer.1.")),
    ("bert-init", {}, lambda n: False),
    ("bert-frozen", {"bert_output_as": "embeddings", "encoder_layers": 2},
     lambda n: n.startswith("encoder.bert.")),
], ids=["frozen", "below-top-1", "init", "frozen-as-embeddings"])
def test_frozen_parameters_stay_and_the_rest_train(bert, method, cfg, frozen):
    """After Adam steps over trainable_parameters(), frozen tensors got no gradient and are
    unchanged; every other tensor changed."""
    model = build(method, bert, **cfg).train()
    # a fully frozen BERT runs in eval
    assert model.encoder.bert.training == (method != "bert-frozen")
    names = dict(model.named_parameters())
    assert {id(p) for p in model.trainable_parameters()} == {
        id(p) for n, p in names.items() if not frozen(n)}
    assert model.num_params()["trained"] == sum(p.numel() for n, p in names.items()
                                                if not frozen(n))
    before = {n: p.detach().clone() for n, p in names.items()}
    optimizer = torch.optim.Adam(model.trainable_parameters(), lr=1e-2)
    for _ in range(3):
        optimizer.zero_grad()
        loss, losses = model.loss(batch())
        loss.backward()
        assert all(p.grad is None for n, p in names.items() if frozen(n))
        optimizer.step()
    assert torch.isfinite(loss) and losses.ntokens == 13
    for n, p in names.items():
        assert torch.equal(p, before[n]) == frozen(n), n


def test_output_modes_shape_the_encoder(bert):
    """`encoder`: no NMT encoder layers, cross-attention reads width 32; `embeddings`: an NMT
    encoder of encoder_layers over a 32 -> d_model projection, trainable under a frozen BERT."""
    as_encoder = build("bert-frozen", bert)
    assert len(as_encoder.encoder.layers) == 0
    assert as_encoder.decoder.layers[0].cross_attn.k_proj.in_features == 32
    as_embeddings = build("bert-frozen", bert, bert_output_as="embeddings", encoder_layers=2)
    assert len(as_embeddings.encoder.layers) == 2
    assert isinstance(as_embeddings.encoder.proj, nn.Linear)
    assert as_embeddings.encoder.proj.weight.shape == (16, 32)
    assert as_embeddings.decoder.layers[0].cross_attn.k_proj.in_features == 16
    assert all(p.requires_grad for p in as_embeddings.encoder.layers.parameters())
    assert all(p.requires_grad for p in as_embeddings.encoder.proj.parameters())
    assert not any(p.requires_grad for p in as_embeddings.encoder.bert.parameters())


@pytest.mark.parametrize("output_as", ["encoder", "embeddings"])
def test_incremental_decoding_and_padding(bert, output_as):
    """encode/decode_step give forward's log-probs; source padding changes nothing."""
    model = build("bert-frozen", bert, bert_output_as=output_as).eval()
    b = batch()
    with torch.no_grad():
        full = F.log_softmax(model(b.src, b.tgt_in), dim=-1)  # (B, T, V)
        state = model.encode(b.src)
        for t in range(b.tgt_in.size(1)):
            step = model.decode_step(b.tgt_in[:, t], state)  # (B, V)
            torch.testing.assert_close(step, full[:, t], rtol=0, atol=1e-5)
        unpadded, padded = model(b.src[1:2, :4], b.tgt_in[1:2]), model(b.src[1:2], b.tgt_in[1:2])
    torch.testing.assert_close(unpadded, padded, rtol=0, atol=1e-5)


@pytest.mark.parametrize("cfg, src_vocab, message", [
    ({"freeze_bert": "top-2"}, BERT_VOCAB, "unknown freeze policy"),
    ({"freeze_bert": "below-top-5"}, BERT_VOCAB, "only 2 layers"),
    ({"bert_output_as": "both"}, BERT_VOCAB, "bert_output_as"),
    ({}, Vocab(size=101, pad=0, bos=2, eos=3, unk=1, mask=4), "tokenize with the BERT"),
])
def test_bad_settings_are_input_errors(bert, cfg, src_vocab, message):
    """Unknown freeze policy or output mode, or a source vocabulary the BERT cannot read."""
    with pytest.raises(InputError, match=message):
        get_method("bert-frozen").build({**SMALL, "src_bert": bert[0], **cfg}, src_vocab, TGT)


def test_missing_src_bert_is_an_input_error():
    """Without `src_bert` the methods say which setting is missing."""
    with pytest.raises(InputError, match="src_bert"):
        get_method("bert-init").build(SMALL, BERT_VOCAB, TGT)


def test_embeddings_without_nmt_encoder_layers_still_project_the_bert_width(bert):
    """bert_output_as embeddings with encoder_layers 0: the projected BERT output is what the
    (narrower) decoder attends to."""
    model = build("bert-frozen", bert, bert_output_as="embeddings", encoder_layers=0)
    loss, _ = model.loss(batch())
    assert torch.isfinite(loss)
    memory = model.encoder(batch().src).memory
    assert memory.shape[-1] == SMALL["d_model"]


def test_a_source_longer_than_the_berts_positions_is_one_line_naming_it(bert):
    """The BERT (64 positions here, 512 for BERT-base) would fail inside Hugging Face's code;
    decoding names the line first, before translating any."""
    from nmtbench.data.tokenization import load_tokenizer
    from nmtbench.evaluation.translate import translate_lines

    model = build("bert-frozen", bert).eval()
    tok = load_tokenizer(bert[0])
    words = " ".join(f"w{5 + i % 90}" for i in range(70))
    with pytest.raises(InputError) as err:
        translate_lines(model, tok, tok, ["w5 w6", words, "w7"], source="test.de")
    assert str(err.value) == ("test.de: line 2: 72 tokens, more than the 64 positions of the "
                              "model's pre-trained encoder")
