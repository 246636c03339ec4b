"""The Transformer baseline: masking, incremental decoding, loss, sizes, and that it can learn."""

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.methods import get_method
from nmtbench.methods.transformer import (
    SIZES,
    EncoderDecoder,
    Transformer,
    TransformerConfig,
    TransformerDecoder,
    embedding,
    fairseq_init,
)
from nmtbench.parts.beam_search import beam_search
from nmtbench.parts.contract import Batch

SRC = Vocab(size=17, pad=0, bos=1, eos=2, unk=3, mask=4)
TGT = Vocab(size=19, pad=0, bos=1, eos=2, unk=3, mask=4)
SMALL = {"d_model": 32, "ffn_dim": 64, "n_heads": 4, "encoder_layers": 2, "decoder_layers": 2}


def small_model(seed: int = 0, **overrides: Any) -> EncoderDecoder:
    torch.manual_seed(seed)
    model = Transformer.build({"size": "tiny", **SMALL, **overrides}, SRC, TGT)
    return model.eval()


def random_ids(vocab: Vocab, *shape: int) -> torch.Tensor:
    return torch.randint(5, vocab.size, shape)  # real tokens only, no specials


@pytest.mark.parametrize("pre_norm", [False, True])
def test_decoder_is_causal(pre_norm: bool) -> None:
    model = small_model(pre_norm=pre_norm)
    src, tgt = random_ids(SRC, 2, 6), random_ids(TGT, 2, 7)
    changed = tgt.clone()
    changed[:, 4] = torch.where(tgt[:, 4] == 5, 6, 5)
    with torch.no_grad():
        before, after = model(src, tgt), model(src, changed)  # (2, 7, V)
    torch.testing.assert_close(after[:, :4], before[:, :4], rtol=0, atol=1e-6)
    assert (after[:, 4:] - before[:, 4:]).abs().amax(dim=-1).min() > 1e-4


@pytest.mark.parametrize("pre_norm", [False, True])
def test_source_padding_does_not_change_output(pre_norm: bool) -> None:
    model = small_model(pre_norm=pre_norm)
    src, tgt = random_ids(SRC, 1, 5), random_ids(TGT, 1, 4)
    padded = F.pad(src, (0, 3), value=SRC.pad)  # (1, 8)
    with torch.no_grad():
        torch.testing.assert_close(model(padded, tgt), model(src, tgt), rtol=0, atol=1e-5)
        # ... and a real token in place of the padding does change it (the mask is what works)
        other = F.pad(src, (0, 3), value=7)
        assert (model(other, tgt) - model(src, tgt)).abs().max() > 1e-4


@pytest.mark.parametrize("pre_norm", [False, True])
def test_incremental_decoding_matches_full_forward(pre_norm: bool) -> None:
    model = small_model(pre_norm=pre_norm)
    src = random_ids(SRC, 3, 6)
    src[0, 4:] = SRC.pad  # rows of different source lengths
    src[1, 2:] = SRC.pad
    tgt = random_ids(TGT, 3, 8)
    tgt[:, 0] = TGT.bos
    with torch.no_grad():
        full = F.log_softmax(model(src, tgt), dim=-1)  # (3, 8, V)
        state = model.encode(src)
        for t in range(5):
            step = model.decode_step(tgt[:, t], state)  # (3, V)
            torch.testing.assert_close(step, full[:, t], rtol=0, atol=1e-5)
        # Beam search reorders rows mid-sentence: the caches must follow their rows.
        order = torch.tensor([2, 0, 0, 1])
        state = model.reorder_state(state, order)
        full = F.log_softmax(model(src[order], tgt[order]), dim=-1)  # (4, 8, V)
        for t in range(5, 8):
            step = model.decode_step(tgt[order, t], state)
            torch.testing.assert_close(step, full[:, t], rtol=0, atol=1e-5)


def test_greedy_search_equals_argmax_of_full_forward() -> None:
    model = small_model(seed=1)
    src = random_ids(SRC, 1, 4)
    out = beam_search(model, src, beam=1, vocab=TGT,
                      max_len_a=1.0, max_len_b=3)
    # The same decision rule recomputed without any cache: BOS and pad banned, EOS ends it.
    prefix = [TGT.bos]
    with torch.no_grad():
        for _ in range(7):  # max length int(1.0 * 4 + 3) = 7
            logits = model(src, torch.tensor([prefix]))[0, -1]
            logits[[TGT.pad, TGT.bos]] = float("-inf")
            prefix.append(int(logits.argmax()))
            if prefix[-1] == TGT.eos:
                break
    assert out == [[t for t in prefix[1:] if t != TGT.eos]]


def test_beam_search_runs_in_eval_mode_and_restores_training() -> None:
    model = small_model(dropout=0.5).train()
    src = random_ids(SRC, 2, 5)
    kw = {"beam": 3, "vocab": TGT}
    assert beam_search(model, src, **kw) == beam_search(model, src, **kw)
    assert model.training


def test_encoder_input_is_scaled_embedding_plus_sinusoid() -> None:
    model = small_model(encoder_layers=0)  # the encoder output is then its input
    src = random_ids(SRC, 1, 3)
    d = SMALL["d_model"]
    # fairseq's sinusoid: channel i < d/2 is sin(pos * 10000^(-i / (d/2 - 1))), channel d/2 + i
    # the matching cos; checked at position 2, channels 0, 3 and d/2 + 3.
    table = model.encoder.embedder.positions
    assert table[2, 0].item() == pytest.approx(math.sin(2.0), abs=1e-6)
    assert table[2, 3].item() == pytest.approx(math.sin(2 * 10000 ** (-3 / 15)), abs=1e-6)
    assert table[2, d // 2 + 3].item() == pytest.approx(math.cos(2 * 10000 ** (-3 / 15)), abs=1e-6)
    with torch.no_grad():
        out = model.encoder(src).memory  # (1, 3, d)
        expected = d ** 0.5 * model.encoder.embed(src) + table[:3]
    torch.testing.assert_close(out, expected)


def test_pre_norm_stacks_end_in_layer_norm() -> None:
    model = small_model(pre_norm=True)
    src, tgt = random_ids(SRC, 2, 5), random_ids(TGT, 2, 4)
    with torch.no_grad():
        nn_init = torch.nn.init
        nn_init.zeros_(model.encoder.norm.weight)
        nn_init.zeros_(model.encoder.norm.bias)
        other_src = random_ids(SRC, 2, 5)
        # a zeroed final encoder norm hides the source entirely ...
        torch.testing.assert_close(model(src, tgt), model(other_src, tgt), rtol=0, atol=1e-6)
        nn_init.zeros_(model.decoder.norm.weight)
        nn_init.zeros_(model.decoder.norm.bias)
        # ... and a zeroed final decoder norm zeroes the logits
        assert model(src, tgt).abs().max() == 0


def test_loss_without_smoothing_is_token_mean_cross_entropy() -> None:
    model = small_model(label_smoothing=0.0)
    tgt_out = random_ids(TGT, 2, 5)
    tgt_out[0, 3:] = TGT.pad  # 3 + 5 = 8 real target tokens
    batch = Batch(src=random_ids(SRC, 2, 6), tgt_in=random_ids(TGT, 2, 5), tgt_out=tgt_out,
                  ids=torch.arange(2))
    loss, losses = model.loss(batch)
    logits = model(batch.src, batch.tgt_in)
    expected = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=TGT.pad)
    torch.testing.assert_close(loss, expected)
    assert losses.ntokens == 8
    assert losses.stats["nll"] == pytest.approx(expected.item(), rel=1e-5)
    assert set(losses.terms) == {"tokens"}  # summed over the batch's tokens
    assert losses.terms["tokens"].item() == pytest.approx(8 * expected.item(), rel=1e-5)
    assert losses.per_token()["tokens"] == pytest.approx(expected.item(), rel=1e-5)


def test_label_smoothing_is_fairseqs() -> None:
    # fairseq gives the gold class 1 - eps and every other class eps / (V - 1); torch's
    # label_smoothing=e gives e / V to every class, so they agree when e = eps * V / (V - 1).
    model = small_model(label_smoothing=0.2)
    batch = Batch(src=random_ids(SRC, 2, 6), tgt_in=random_ids(TGT, 2, 5),
                  tgt_out=random_ids(TGT, 2, 5), ids=torch.arange(2))
    loss, losses = model.loss(batch)
    logits = model(batch.src, batch.tgt_in).flatten(0, 1)
    target = batch.tgt_out.flatten()
    v = TGT.size
    expected = F.cross_entropy(logits, target, label_smoothing=0.2 * v / (v - 1))
    torch.testing.assert_close(loss, expected)
    assert losses.stats["nll"] == pytest.approx(F.cross_entropy(logits, target).item(), rel=1e-5)


def test_build_sizes_and_overrides() -> None:
    model = Transformer.build({"size": "iwslt", "encoder_layers": 1, "decoder_layers": 1,
                               "max_epochs": 50, "lr": 5e-4}, SRC, TGT)
    arch = model.settings.architecture
    assert arch == TransformerConfig(d_model=512, ffn_dim=1024, n_heads=4, encoder_layers=1,
                                     decoder_layers=1, dropout=0.3)
    assert arch.label_smoothing == 0.1 and arch.max_positions == 1024
    assert len(model.encoder.layers) == 1 and len(model.decoder.layers) == 1
    assert SIZES["deep20"].pre_norm and SIZES["deep20"].encoder_layers == 20
    with pytest.raises(InputError, match="huge"):
        Transformer.build({"size": "huge"}, SRC, TGT)
    assert {"size", "d_model", "pre_norm", "label_smoothing"} <= Transformer.settings.keys()
    assert "lr" not in Transformer.settings.keys()


def test_source_format_is_fairseqs_unless_asked() -> None:
    assert not small_model().source_bos  # x [SEP], as fairseq's x </s>
    assert small_model(src_bos=True).source_bos


def test_registry() -> None:
    assert get_method("transformer") is Transformer
    with pytest.raises(InputError, match="unknown method 'bart'; known: .*transformer"):
        get_method("bart")


def expected_num_params(cfg: TransformerConfig, src_v: int, tgt_v: int) -> int:
    """Closed form: two embeddings (the output projection is tied, no bias), then per layer."""
    d, f = cfg.d_model, cfg.ffn_dim
    attention = 4 * (d * d + d)  # q, k, v, out projections with biases
    ffn = (d * f + f) + (f * d + d)
    norm = 2 * d
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    final_norms = 2 * norm if cfg.pre_norm else 0
    return ((src_v + tgt_v) * d + cfg.encoder_layers * encoder_layer
            + cfg.decoder_layers * decoder_layer + final_norms)


@pytest.mark.parametrize("pre_norm", [False, True])
def test_num_params_base(pre_norm: bool) -> None:
    src_v, tgt_v = Vocab(1000, 0, 1, 2, 3, 4), Vocab(1200, 0, 1, 2, 3, 4)
    model = Transformer.build({"size": "base", "pre_norm": pre_norm}, src_v, tgt_v)
    expected = expected_num_params(model.settings.architecture, 1000, 1200)
    # Transformer-base has 44,138,496 parameters besides its embeddings (+2 LayerNorms pre-norm).
    assert expected == 44_138_496 + 2200 * 512 + (4 * 512 if pre_norm else 0)
    assert model.num_params() == {"total": expected, "trained": expected}


def test_initialisation_is_fairseqs() -> None:
    """fairseq 0.12.2's transformer: attention projections xavier-uniform (bound
    sqrt(6 / (fan_in + fan_out)), q/k/v with gain 1/sqrt(2)), out_proj bias zero; feed-forward
    layers and q/k/v biases at nn.Linear's default U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the
    harness's former xavier feed-forward init left the toy world's valid loss 7% higher."""
    torch.manual_seed(0)
    model = Transformer.build({"size": "base"}, Vocab(1000, 0, 1, 2, 3, 4), TGT)
    assert model.encoder.embed.weight[0].abs().max() == 0  # pad row
    assert model.encoder.embed.weight[1:].std().item() == pytest.approx(512 ** -0.5, rel=0.05)

    def spans(tensor: torch.Tensor, bound: float) -> bool:  # uniform on (-bound, bound)
        return 0.95 * bound < tensor.abs().max().item() <= bound

    xavier = (6 / 1024) ** 0.5
    for layer in (model.encoder.layers[0], model.decoder.layers[0]):
        assert spans(layer.ffn.fc1.weight, 512 ** -0.5)
        assert spans(layer.ffn.fc1.bias, 512 ** -0.5)
        assert spans(layer.ffn.fc2.weight, 2048 ** -0.5)
        assert spans(layer.ffn.fc2.bias, 2048 ** -0.5)
        for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
            assert spans(proj.weight, xavier / 2 ** 0.5)
            assert spans(proj.bias, 512 ** -0.5)
        assert spans(layer.self_attn.out_proj.weight, xavier)
        assert layer.self_attn.out_proj.bias.abs().max() == 0


def test_attention_over_a_wider_memory_is_xavier_without_gain() -> None:
    """fairseq drops the 1/sqrt(2) gain when keys/values come from another width (kdim)."""
    torch.manual_seed(0)
    decoder = TransformerDecoder(SIZES["base"], embedding(TGT, 512), memory_dim=768)
    fairseq_init(decoder.layers)  # as every method builds a decoder over a BERT's width
    attn = decoder.layers[0].cross_attn
    assert 0.95 * (6 / (768 + 512)) ** 0.5 < attn.k_proj.weight.abs().max() <= (6 / 1280) ** 0.5
    assert 0.95 * (6 / 1024) ** 0.5 < attn.q_proj.weight.abs().max() <= (6 / 1024) ** 0.5


def test_overfits_a_copy_task() -> None:
    vocab = Vocab(size=12, pad=0, bos=1, eos=2, unk=3, mask=4)
    seqs = [[5, 6, 7], [8, 9, 10, 11], [7, 5, 9, 6, 10], [11, 11, 5], [6, 8], [10, 7, 8, 5, 9]]

    def padded(rows: list[list[int]]) -> torch.Tensor:
        width = max(map(len, rows))
        return torch.tensor([r + [vocab.pad] * (width - len(r)) for r in rows])

    batch = Batch(src=padded([[vocab.bos, *s, vocab.eos] for s in seqs]),
                  tgt_in=padded([[vocab.bos, *s] for s in seqs]),
                  tgt_out=padded([[*s, vocab.eos] for s in seqs]), ids=torch.arange(len(seqs)))
    torch.manual_seed(0)
    model = Transformer.build({"size": "tiny", **SMALL, "dropout": 0.0, "label_smoothing": 0.0},
                              vocab, vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98))
    nlls = []
    for _ in range(150):
        loss, losses = model.loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        nlls.append(losses.stats["nll"])
    assert nlls[0] > 2.0  # about log(12) at the start
    assert nlls[-1] < 0.01
    # greedy: a sentence stops once `beam` hypotheses have finished (fairseq's rule, see
    # nmtbench.parts.beam_search), which low-scoring ones can do before this very sure model's copy
    out = beam_search(model, batch.src, beam=1, vocab=vocab)
    assert out == seqs
