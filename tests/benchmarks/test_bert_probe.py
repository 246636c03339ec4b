"""benchmarks/bert_probe.py: the linear probe of token identity per BERT layer."""

import importlib.util
from pathlib import Path

import torch
from tiny_checkpoints import save_tiny_bert

_SPEC = importlib.util.spec_from_file_location(
    "bert_probe", Path(__file__).parents[2] / "benchmarks" / "bert_probe.py")
bert_probe = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bert_probe)


def test_probe_recovers_labels_the_states_encode_and_not_others():
    torch.manual_seed(0)
    y = torch.randint(0, 6, (600,))
    train = torch.arange(600) < 300
    encoded = torch.nn.functional.one_hot(y, 6).float() * 3 + 0.3 * torch.randn(600, 6)
    assert bert_probe.probe_accuracy(encoded, y, train, 6, steps=200) == 1.0
    unrelated = torch.randn(600, 6)
    assert bert_probe.probe_accuracy(unrelated, y, train, 6, steps=200) < 0.35  # chance: 1/6


def test_layer_states_keep_every_non_special_token_per_layer(tmp_path):
    save_tiny_bert(tmp_path / "bert", mlm=False)
    lines = ["w5 w6 w7", "w8 w5", "w9"]
    states, ids, sentence = bert_probe.layer_states(str(tmp_path / "bert"), lines)
    assert len(states) == 3  # embeddings and the tiny BERT's two layers
    assert all(s.shape == (6, 32) for s in states)
    assert ids.tolist() == [5, 6, 7, 8, 5, 9]  # [CLS] and [SEP] left out
    assert sentence.tolist() == [0, 0, 0, 1, 1, 2]
