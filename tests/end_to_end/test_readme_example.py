"""The README's worked example of adding a method runs as written: its module builds, its
model is bert-init's with two optimiser groups, and the BERT's rate ramps as documented."""

import re
import sys
import types
from pathlib import Path

from tiny_checkpoints import BERT_VOCAB, save_tiny_bert

from nmtbench.data.tokenization import Vocab
from nmtbench.models.contract import Progress

README = Path(__file__).resolve().parents[2] / "README.md"


def example_module(monkeypatch) -> types.ModuleType:
    section = README.read_text().split("### Worked example", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    module = types.ModuleType("nmtbench.methods.bert_slow")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look it up
    exec(re.sub(r"(?m)^   ", "", code), module.__dict__)  # noqa: S102 (our own README)
    return module


def test_readme_example_method_builds_and_ramps_the_bert_rate(tmp_path, monkeypatch):
    module = example_module(monkeypatch)
    save_tiny_bert(tmp_path / "bert", mlm=False)
    model = module.BertSlow.build({"size": "tiny", "src_bert": "bert", "bert_lr_scale": 0.05},
                                  BERT_VOCAB, Vocab(23, 0, 1, 2, 3, 4),
                                  {"src_bert": str(tmp_path / "bert")})
    nmt, bert = model.param_groups()
    assert {id(p) for p in bert.params} == {id(p) for p in model.encoder.bert.parameters()}
    assert len(nmt.params) + len(bert.params) == len(list(model.trainable_parameters()))
    assert bert.lr_scale(Progress(0, 100)) == 0.0
    assert bert.lr_scale(Progress(25, 100)) == 0.025
    assert bert.lr_scale(Progress(90, 100)) == 0.05 and nmt.lr_scale(Progress(0, 100)) == 1.0
