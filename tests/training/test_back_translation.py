"""Back-translation (AB-Net Figure 3b): reversed datasets, the plan's reverse run and its
translation, and training on the first N synthetic pairs beside the parallel data."""

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from nmtbench.errors import InputError
from nmtbench.parts.batches import read_back_translations
from nmtbench.training.trainer import Trainer
from nmtbench.workflow import config as nmtconfig
from nmtbench.workflow.run_inputs import back_translation

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "config" / "schema.yaml"
BT_RUNS = {"abnet-bt-mask-predict-500k": 6000, "abnet-bt-mask-predict-1m": 12000,
           "abnet-bt-mask-predict-2m": 24000}  # config/config.yaml's toy amounts


@pytest.fixture
def cfg():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_a_reversed_dataset_swaps_sides_and_keeps_its_own_keys():
    datasets = {
        "de-en": {"kind": "iwslt14", "src_lang": "de", "tgt_lang": "en", "lowercase": True,
                  "detok_lang": "en", "vocab_size": {"src": 100, "tgt": 200},
                  "checkpoints": {"src": "german-bert"}, "sequence_distillation": "t",
                  "overrides": {"abnet": {"src_bert": "german-bert"}}},
        "en-de": {"kind": "reversed", "of": "de-en", "vocab_size": {"src": 7, "tgt": 8}},
    }
    nmtconfig.resolve_reversed(datasets)
    assert datasets["en-de"] == {
        "kind": "reversed", "of": "de-en", "src_lang": "en", "tgt_lang": "de",
        "lowercase": True, "detok_lang": "de", "checkpoints": {"tgt": "german-bert"},
        "vocab_size": {"src": 7, "tgt": 8},  # its own keys win
    }  # neither the distillation teacher nor the overrides naming a side's BERT carry over


def test_the_toy_reverse_model_trains_on_the_toy_world_read_backwards(cfg):
    plan = nmtconfig.check(cfg, SCHEMA)
    assert cfg["datasets"]["toy-reverse"]["vocab_size"] == {"src": 1500, "tgt": 2000, "joint": 3000}
    for experiment, sentences in BT_RUNS.items():
        bt = back_translation.source(plan, "toy", experiment)
        assert bt.reverse.dataset == "toy-reverse" and bt.reverse.run == "transformer-tiny"
        assert bt.sentences == max(BT_RUNS.values())  # one translation serves every amount
        assert plan.train_settings("toy", experiment)["bt_sentences"] == sentences
        assert plan.run_inputs("toy", experiment)["bt_src"].path(1) == (
            "results/runs/toy-reverse/transformer-tiny/seed1/"
            "backtranslate.toy.24000.beam5-lp1-fairseq-best.txt")
    assert back_translation.source(plan, "toy", "abnet-mask-predict") is None
    # the three amounts train three runs, none shared with the plain Mask-Predict
    runs = {plan.cell("iwslt14-de-en", e, "t").run for e in [*BT_RUNS, "abnet-mask-predict"]}
    assert len(runs) == 4


def _bt(c, **keys):
    c["datasets"]["toy"]["back_translation"].update(keys)


@pytest.mark.parametrize("mutate, message", [
    (lambda c: _bt(c, reverse="nowhere"),
     "config key 'datasets.toy.back_translation.reverse': unknown dataset 'nowhere'"),
    (lambda c: _bt(c, reverse="multi30k-de-en"),
     "config key 'datasets.toy.back_translation.reverse': 'multi30k-de-en' is not toy read "
     "the other way round"),
    (lambda c: _bt(c, model="abnet-mask-predict"),
     "config key 'datasets.toy.back_translation.model': 'abnet-mask-predict' is not an "
     "implemented autoregressive experiment"),
    (lambda c: _bt(c, corpus="english-wikipedia"),
     "config key 'datasets.toy.back_translation.corpus': a toy world back-translates its own "
     "monolingual corpus"),
    (lambda c: c["datasets"]["toy-reverse"].update(of="toy-reverse"),
     "config key 'datasets.toy-reverse.of': 'toy-reverse' is not a configured dataset that is "
     "not itself reversed"),
    (lambda c: c["datasets"]["toy-reverse"].pop("of"), "config key 'datasets.toy-reverse.of' "
     "is missing"),
    (lambda c: (c.update(tables=["abnet2020.figure3b"]), c["datasets"]["toy"].pop(
        "back_translation")),
     "experiment 'abnet-bt-mask-predict-1m' on dataset 'toy' adds 12000 back-translated "
     "sentences (bt_sentences), but config key 'datasets.toy.back_translation' is not set"),
])
def test_back_translation_config_errors_name_the_key(cfg, mutate, message):
    mutate(cfg)
    with pytest.raises(InputError) as err:
        nmtconfig.check(cfg, SCHEMA)
    assert str(err.value).startswith(message), str(err.value)


def test_real_data_back_translates_a_named_corpus_in_the_right_direction():
    cfg = nmtconfig.load_config([ROOT / "config" / "config.yaml", ROOT / "config" / "paper.yaml"])
    plan = nmtconfig.check(cfg, SCHEMA)
    bt = back_translation.source(plan, "iwslt14-de-en", "abnet-bt-mask-predict-500k")
    assert (bt.reverse.dataset, bt.reverse.run, bt.sentences) == (
        "iwslt14-en-de", "transformer-base", 2_000_000)
    for mutate, message in [
        (lambda b: b.pop("corpus"), "config key 'datasets.iwslt14-de-en.back_translation.corpus'"
         " is missing"),
        (lambda b: b.update(reverse="iwslt14-it-en"), "config key 'datasets.iwslt14-de-en."
         "back_translation.reverse': 'iwslt14-it-en' does not translate en into de"),
    ]:
        broken = nmtconfig.load_config([ROOT / "config" / "config.yaml",
                                        ROOT / "config" / "paper.yaml"])
        mutate(broken["datasets"]["iwslt14-de-en"]["back_translation"])
        with pytest.raises(InputError, match="^" + message.replace(".", r"\.")):
            nmtconfig.check(broken, SCHEMA)


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


def test_back_translations_take_the_first_pairs_and_drop_empty_sources(tmp_path, caplog):
    src = _write(tmp_path / "bt.src", ["s1", "", "s3", "s4"])
    tgt = _write(tmp_path / "mono.tgt", ["t1", "t2", "t3", "t4", "t5", "t6"])
    with caplog.at_level(logging.WARNING):
        assert read_back_translations(src, tgt, 3) == (["s1", "s3"], ["t1", "t3"])
    assert "dropped 1 of 3 back-translated pairs with an empty source" in caplog.text
    with pytest.raises(InputError, match=r"bt.src has 4 lines, fewer than the 5 "):
        read_back_translations(src, tgt, 5)


CFG = {"method": "transformer", "size": "tiny", "d_model": 32, "ffn_dim": 64, "n_heads": 2,
       "encoder_layers": 1, "decoder_layers": 1, "max_tokens": 800, "max_epochs": 1,
       "warmup_updates": 5, "seed": 3}


def test_the_trainer_adds_the_first_bt_sentences_pairs_to_the_parallel_data(toy_dir, toy_paths,
                                                                             tmp_path):
    """Here the 'back-translations' are the toy world's own monolingual sources, so the
    extra pairs are the monolingual lines, in order, after the parallel ones."""
    mono_src = (toy_dir / "mono.src").read_text().splitlines()
    mono_tgt = (toy_dir / "mono.tgt").read_text().splitlines()
    paths = replace(toy_paths, inputs={"bt_src": _write(tmp_path / "bt.src", mono_src[:50]),
                                       "bt_tgt": str(toy_dir / "mono.tgt")})
    plain = Trainer(tmp_path / "plain", CFG, toy_paths, device="cpu").train_data
    trainer = Trainer(tmp_path / "bt", {**CFG, "bt_sentences": 30}, paths, device="cpu")
    data = trainer.train_data
    assert len(data) == len(plain) + 30
    assert data.src[:len(plain)] == plain.src and data.tgt[:len(plain)] == plain.tgt
    encoded = trainer.tgt_tok(mono_tgt[:30], add_special_tokens=True)["input_ids"]
    assert data.tgt[len(plain):] == encoded
    # line numbers: the back-translated pairs' follow the parallel corpus's
    assert data.lines[len(plain):] == [plain.corpus_lines + i for i in range(30)]
    with pytest.raises(InputError, match="bt_sentences is 30 but no back-translated data"):
        Trainer(tmp_path / "none", {**CFG, "bt_sentences": 30}, toy_paths, device="cpu")


def test_decode_translates_only_the_first_max_lines(toy_dir, toy_paths, tmp_path, capsys):
    from nmtbench.cli import main

    run = tmp_path / "run"
    Trainer(run, CFG, toy_paths, device="cpu").run()
    out, info = tmp_path / "hyp.txt", tmp_path / "info.json"

    def decode(max_lines: int) -> int:
        return main(["decode", "--run-dir", str(run), "--src", str(toy_dir / "mono.tgt"),
                     "--out", str(out), "--info", str(info), "--beam", "2",
                     "--max-lines", str(max_lines), "--device", "cpu"])

    assert decode(7) == 0, capsys.readouterr().err[-2000:]
    assert len(out.read_text().splitlines()) == 7
    assert json.loads(info.read_text())["decoding"] == "at"
    capsys.readouterr()
    assert decode(10**6) == 2
    assert capsys.readouterr().err.endswith(
        "mono.tgt has 2000 lines, fewer than the 1000000 to translate\n")
