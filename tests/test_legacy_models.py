"""Core v2 changed how models are put together, not what they compute: weights trained by the
code before it (`fixtures/legacy_models.pt`, made by `fixtures/make_legacy_models.py` at commit
1547649), renamed onto today's models, give the same loss and the same translations."""

import re
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel

from nmtbench.data.tokenization import Vocab
from nmtbench.methods import get_method
from nmtbench.models.beam_search import beam_search
from nmtbench.models.contract import Batch
from nmtbench.models.mask_predict import mask_predict

FIXTURES = torch.load(Path(__file__).parent / "fixtures" / "legacy_models.pt",
                      weights_only=True)
VARIANTS = sorted(k for k in FIXTURES if k != "bert_config")

# old state-dict prefixes -> new ones (the models' parameter names before and after)
RENAMES = [("src_embed.", "encoder.embed."), ("tgt_embed.", "decoder.embed."),
           ("encoder_norm.", "encoder.norm."), ("decoder_norm.", "decoder.norm."),
           ("embed_lengths.", "encoder.embed_lengths."), ("bert_proj.", "encoder.proj."),
           ("bert.", "encoder.bert."), ("source.", "encoder."), ("target.", "decoder.")]


def new_name(old: str) -> str:
    for before, after in RENAMES:
        if old.startswith(before):
            return after + old[len(before):]
    return re.sub(r"^(encoder|decoder)\.(\d+)\.", r"\1.layers.\2.", old)


@pytest.fixture(scope="module")
def berts(tmp_path_factory):
    """Checkpoint directories of the fixtures' BERT architecture (their weights are replaced
    by the fixture's)."""
    root = tmp_path_factory.mktemp("legacy")
    config = BertConfig(**FIXTURES["bert_config"])
    BertModel(config, add_pooling_layer=False).save_pretrained(root / "src")
    BertForMaskedLM(config).save_pretrained(root / "tgt")
    return {"src": str(root / "src"), "tgt": str(root / "tgt")}


@pytest.mark.parametrize("variant", VARIANTS)
def test_old_weights_give_the_same_loss_and_translations(variant, berts):
    fixture = FIXTURES[variant]
    settings = fixture["settings"]
    src_vocab, tgt_vocab = Vocab(*fixture["src_vocab"]), Vocab(*fixture["tgt_vocab"])
    pretrained = {role: berts[settings[role]] for role in ("src_bert", "tgt_bert")
                  if settings.get(role)}
    model = get_method(settings["method"]).build(settings, src_vocab, tgt_vocab, pretrained)
    model.load_state_dict({new_name(k): v for k, v in fixture["state"].items()})  # strict
    model.eval()
    batch = Batch(*fixture["batch"], torch.arange(3))
    special = dict(bos=tgt_vocab.bos, eos=tgt_vocab.eos, pad=tgt_vocab.pad)
    with torch.no_grad():
        torch.manual_seed(123)
        loss = model.loss(batch)[0].item()
        if model.decoding == "beam":
            hyps = beam_search(model, batch.src, beam=3, max_len_a=1.0, max_len_b=4, lenpen=1.0,
                               lenpen_form="fairseq", **special)
        else:
            hyps = mask_predict(model, batch.src, length_beam=2, iterations=3,
                                mask=tgt_vocab.mask, **special)
    # the same sums in the same order, but which vector kernels run them depends on the CPU:
    # bit for bit where the fixture was made, within float32 rounding on another CPU
    assert loss == pytest.approx(fixture["loss"], rel=1e-6, abs=0)
    assert hyps == fixture["hyps"]
