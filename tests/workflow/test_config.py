"""Config errors stop with one line naming the key; config files merge like --configfile."""

import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nmtbench.errors import InputError
from nmtbench.workflow import config as nmtconfig
from nmtbench.workflow.config import NAME_RULE
from nmtbench.workflow.papers import PAPERS_DIR

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "config" / "schema.yaml"
DEFAULT = ROOT / "config" / "config.yaml"
SMOKE = ROOT / "config" / "smoke.yaml"


@pytest.fixture(scope="module")
def default_config() -> dict:
    return yaml.safe_load(DEFAULT.read_text())


@pytest.fixture
def cfg(default_config):
    """config/config.yaml, a copy of its own for each test to change (parsed once: PyYAML's
    pure-Python parser takes 40 ms a time)."""
    return copy.deepcopy(default_config)


def _runs(plan):
    return {"/".join(t.split("/")[2:4]) for t in plan.targets()}


def test_default_config_is_valid(cfg):
    plan = nmtconfig.check(cfg, SCHEMA)
    assert plan.names == cfg["tables"]
    assert plan.seeds == [1]


def _experiment(c, **settings):
    c.setdefault("experiments", {}).setdefault("transformer-tiny", {}).update(settings)


@pytest.mark.parametrize("mutate, message", [
    # schema: types, required keys, unknown keys, enums and patterns
    (lambda c: _experiment(c, max_epochs="ten"),
     "config key 'experiments.transformer-tiny.max_epochs': 'ten' is not of type 'integer'"),
    # a count written as a float: the standard's "integer" takes 2.0, range() does not
    (lambda c: c["datasets"]["toy"]["overrides"]["transformer"].update(encoder_layers=1.0),
     "config key 'datasets.toy.overrides.transformer.encoder_layers': 1.0 is not of type "
     "'integer'"),
    (lambda c: c["datasets"]["toy"]["world"].update(train_pairs=300.0),
     "config key 'datasets.toy.world.train_pairs': 300.0 is not of type 'integer'"),
    (lambda c: c["analysis"].update(bootstrap_samples=10 ** 9),
     "config key 'analysis.bootstrap_samples': 1000000000 is greater than the maximum of "
     "100000"),
    (lambda c: c.update(decode={"max_len_a": 1e308}),
     "config key 'decode.max_len_a': 1e+308 is greater than the maximum of 1000"),
    (lambda c: c.pop("seeds"), "config key 'seeds' is missing"),
    (lambda c: c.update(seeds=3), "config key 'seeds': 3 is not of type 'array'"),
    (lambda c: c.update(seeds=["x"]), "config key 'seeds.0': 'x' is not of type 'integer'"),
    (lambda c: c["datasets"]["toy"].pop("lowercase"),
     "config key 'datasets.toy.lowercase' is missing"),
    # a setting the method inherits but never reads (its encoder is the pre-trained model)
    (lambda c: c.setdefault("experiments", {}).setdefault("abnet", {}).update(encoder_layers=2),
     "config key 'experiments.abnet.encoder_layers' is not a setting of the trainer or of "
     "method 'abnet'"),
    (lambda c: c.setdefault("experiments", {}).setdefault("deepfusion-m2", {}).update(
        encoder_layers=2),
     "config key 'experiments.deepfusion-m2.encoder_layers' is not a setting of the trainer or "
     "of method 'deep-fusion'"),
    (lambda c: c.update(tabels=["toyworld.table1"]),
     "config key '(top level)': Additional properties are not allowed ('tabels' was "
     "unexpected)"),
    (lambda c: c.update(device="gpu"), "config key 'device': 'gpu' does not match"),
    # a trimmed checkpoint: its size, dataset and original checked
    (lambda c: c.update(trimmed={"t": {"checkpoint": "bert-base-cased", "dataset": "toy",
                                       "size": 1}}), "config key 'trimmed.t.size': 1 is less"),
    (lambda c: c.update(trimmed={"t": {"checkpoint": "bert-base-cased", "dataset": "toyy",
                                       "size": 900}}),
     "config key 'trimmed.t.dataset': unknown dataset 'toyy'"),
    (lambda c: c.update(trimmed={"t": {"checkpoint": "t", "dataset": "toy", "size": 900}}),
     "config key 'trimmed.t.checkpoint': 't' is trimmed itself; trim its original"),
    (lambda c: c.update(trimmed={"t": {"checkpoint": "../x", "dataset": "toy", "size": 900}}),
     "config key 'trimmed.t.checkpoint': checkpoint directory '../x' does not exist"),
    (lambda c: c.update(trimmed={"toy-bert-src": {"checkpoint": "bert-base-cased",
                                                  "dataset": "toy", "size": 900}}),
     "config key 'trimmed.toy-bert-src': also a `pretraining` name"),
    (lambda c: c.update(tables=[]), "config key 'tables': "),
    (lambda c: c["datasets"]["toy"].update(kind="wmt99"),
     "config key 'datasets.toy.kind': 'wmt99' is not one of"),
    (lambda c: c["defaults"].update(lr=0), "config key 'defaults.lr': 0 is less than"),
    (lambda c: c.update(decode={"lenpen_form": "linear"}), "config key 'decode.lenpen_form'"),
    (lambda c: c.update(decode={"beem": 3}),
     "config key 'decode': Additional properties are not allowed ('beem' was unexpected)"),
    (lambda c: _experiment(c, decode={"beam": 0}),
     "config key 'experiments.transformer-tiny.decode.beam': 0 is less than the minimum"),
    (lambda c: c["resources"]["train"].pop("gpu"),
     "config key 'resources.train.gpu' is missing"),
    # references: methods, settings, datasets, tables
    (lambda c: _experiment(c, method="bert-magic"),
     "config key 'experiments.transformer-tiny.method': unknown method 'bert-magic'"),
    (lambda c: _experiment(c, max_epoch=3),
     "config key 'experiments.transformer-tiny.max_epoch' is not a setting of the trainer "
     "or of method 'transformer'"),
    (lambda c: c.setdefault("experiments", {}).update({"brand-new": {"size": "tiny"}}),
     "config key 'experiments.brand-new.method' is missing"),
    (lambda c: c["defaults"].update(max_epoch=3),
     "config key 'defaults.max_epoch' is not a setting of the trainer"),
    (lambda c: c["dataset_map"].update({"wmt14-en-de": "wmt14"}),
     "config key 'dataset_map.wmt14-en-de': unknown dataset 'wmt14'"),
    (lambda c: c["datasets"]["toy"]["overrides"].update({"bert-magic": {"size": "tiny"}}),
     "config key 'datasets.toy.overrides.bert-magic': neither a method (abnet, bert-frozen, "
     "bert-fused, bert-init, bert-kd, bert-kd-teacher, cmlm, ctnmt, deep-fusion, rnn, "
     "transformer) nor an experiment with one"),
    (lambda c: c["datasets"]["toy"].update({"sequence_distillation": "abnet-mask-predict"}),
     "config key 'datasets.toy.sequence_distillation': 'abnet-mask-predict' is not an implemented "
     "autoregressive experiment"),
    (lambda c: c["datasets"]["toy"]["overrides"]["transformer"].update(sise="tiny"),
     "config key 'datasets.toy.overrides.transformer.sise' is not a setting of the trainer"),
    (lambda c: c.update(tables=["nope"]),
     "config key 'tables': unknown table or figure 'nope'; known: abnet2020.table1"),
    (lambda c: c["dataset_map"].pop("iwslt14-de-en"),
     "abnet2020.table1: dataset 'iwslt14-de-en' is not configured"),
    # pre-trained checkpoints: pre-training entries, the roles a run needs, local directories
    (lambda c: c["pretraining"]["toy-bert-src"].update(dataset="wmt14"),
     "config key 'pretraining.toy-bert-src.dataset': 'wmt14' is not a configured dataset"),
    (lambda c: c["pretraining"]["toy-bert-src"].update(layer=2),
     "config key 'pretraining.toy-bert-src': pre-training setting 'layer' is unknown"),
    (lambda c: c["pretraining"]["toy-gpt2-tgt"].update(model="t5"),
     "config key 'pretraining.toy-gpt2-tgt.model': 't5' is not one of ['bert', 'gpt2']"),
    (lambda c: (c.update(tables=["toyworld.table1"]),
                c["datasets"]["toy"]["overrides"]["bert-init"].pop("src_bert"),
                c["pretraining"].update({"toy-bert-src2": {**c["pretraining"]["toy-bert-src"]}})),
     "toyworld.table1 column 'bleu': experiment 'bert-init-500' on dataset 'toy' names no "
     "src_bert checkpoint (set it in the experiment, or 'datasets.toy.checkpoints.src', or name "
     "one of the BERTs pre-trained on that side, toy-bert-src, toy-bert-src2)"),
    (lambda c: c["datasets"]["toy"]["overrides"]["bert-init"].update(src_bert="/no/such/bert"),
     "run toy/bert-init, src_bert: checkpoint directory '/no/such/bert' does not exist"),
    (lambda c: c["datasets"]["toy"]["overrides"]["bert-frozen"].update(freeze_bert="top"),
     "config key 'datasets.toy.overrides.bert-frozen.freeze_bert'"),
    (lambda c: _experiment(c, src_bert="bert-base-uncased"),
     "config key 'experiments.transformer-tiny.src_bert' is not a setting of the trainer or "
     "of method 'transformer'"),
    # real datasets: languages, a recipe, and a download entry for every file it reads
    (lambda c: c["datasets"]["multi30k-de-en"].pop("src_lang"),
     "config key 'datasets.multi30k-de-en.src_lang' is missing (real datasets name their "
     "languages)"),
    (lambda c: c["datasets"]["multi30k-de-en"].update(tgt_lang="fr"),
     "config key 'sources.multi30k.files.train.fr.gz' is missing (dataset 'multi30k-de-en' "
     "reads it)"),
    (lambda c: (c["datasets"].update(wmt14={**c["datasets"]["multi30k-de-en"], "kind": "wmt14",
                                            "src_lang": "en", "tgt_lang": "de"}),
                c["sources"]["statmt"]["files"].pop("wmt14/dev.tgz")),
     "config key 'sources.statmt.files.wmt14/dev.tgz' is missing (dataset 'wmt14' reads it)"),
    (lambda c: c["sources"]["statmt"]["files"]["wmt14/dev.tgz"].update(sha256="abc"),
     "config key 'sources.statmt.files.wmt14/dev.tgz.sha256'"),
    (lambda c: c["sources"]["statmt"].update(base_url="ftp.example.org"),
     "config key 'sources.statmt.base_url': 'ftp.example.org' does not match"),
    (lambda c: c["datasets"]["multi30k-de-en"].update(kind="wmt15"),
     "config key 'datasets.multi30k-de-en.kind': 'wmt15' is not one of"),
    # names become paths and command-line arguments: one safe pattern ($defs.name)
    (lambda c: c["datasets"].update({"$(touch /tmp/pwned)": c["datasets"]["toy"]}),
     "config key 'datasets': '$(touch /tmp/pwned)' is not a name (letters, digits, _ and -"),
    (lambda c: c["datasets"].update({"..": c["datasets"]["toy"]}),
     "config key 'datasets': '..' is not a name"),
    (lambda c: c["datasets"].update({"a/b": c["datasets"]["toy"]}),
     "config key 'datasets': 'a/b' is not a name"),
    (lambda c: c["dataset_map"].update({"iwslt14-de-en": "$(id)"}),
     "config key 'dataset_map.iwslt14-de-en': '$(id)' is not a name"),
    (lambda c: c["datasets"]["toy-reverse"].update({"of": "../toy"}),
     "config key 'datasets.toy-reverse.of': '../toy' is not a name"),
    (lambda c: c.setdefault("experiments", {}).update({"x;id": {"method": "transformer"}}),
     "config key 'experiments': 'x;id' is not a name"),
    (lambda c: _experiment(c, init_from={"experiment": "a b"}),
     "config key 'experiments.transformer-tiny.init_from.experiment': 'a b' is not a name"),
    (lambda c: c["pretraining"].update({"../bert": c["pretraining"]["toy-bert-src"]}),
     "config key 'pretraining': '../bert' is not a name"),
    (lambda c: c.update(tables=["../../etc/passwd"]),
     "config key 'tables.0': '../../etc/passwd' is not a name"),
    (lambda c: c["sources"].update({"a'b": c["sources"]["fairseq"]}),
     "config key 'sources': \"a'b\" is not a name"),
    (lambda c: c["sources"]["fairseq"]["files"].update({"../../x.tgz": {"sha256": None}}),
     "config key 'sources.fairseq.files': '../../x.tgz' is not a relative path of names"),
    # numbers: NaN and infinity pass every `minimum` (comparisons with NaN are false)
    (lambda c: c.update(decode={"lenpen": float("nan")}),
     "config key 'decode.lenpen': nan is not a finite number"),
    (lambda c: c["defaults"].update(lr=float("nan")),
     "config key 'defaults.lr': nan is not a finite number"),
    (lambda c: _experiment(c, lr=float("inf")),
     "config key 'experiments.transformer-tiny.lr': inf is not a finite number"),
    (lambda c: c["datasets"]["toy"]["overrides"]["transformer"].update(dropout=float("-inf")),
     "config key 'datasets.toy.overrides.transformer.dropout'"),
    (lambda c: c["datasets"]["toy"]["world"].update(p_pp=float("nan")),
     "config key 'datasets.toy.world.p_pp': nan is not a finite number"),
    # what the jobs would otherwise take silently, or fail on with a traceback
    (lambda c: c["datasets"]["toy"].update(detok_lang="english"),
     "config key 'datasets.toy.detok_lang': unknown detokenizer language 'english'; known: "),
    (lambda c: c["datasets"]["toy"]["world"].pop("train_pairs"),
     "config key 'datasets.toy.world.train_pairs' is missing"),
    (lambda c: c["datasets"]["toy"]["world"].update(noun=3),
     "config key 'datasets.toy.world': Additional properties are not allowed ('noun' was "
     "unexpected)"),
    (lambda c: c["datasets"]["toy"].pop("world"), "config key 'datasets.toy.world' is missing"),
    # a pattern's `$` matches before a final line break in Python: names must end there
    (lambda c: c["datasets"].update({"toy\n": c["datasets"].pop("toy")}),
     "config key 'datasets': 'toy\\n' is not a name"),
    (lambda c: c.update(experiments={"transformer-tiny\n": {"method": "transformer"}}),
     "config key 'experiments': 'transformer-tiny\\n' is not a name"),
    (lambda c: c.update(tables=["abnet2020.table1\n"]),
     "config key 'tables.0': 'abnet2020.table1\\n' is not a name"),
    (lambda c: c.update(device="cpu\n"), "config key 'device': 'cpu\\n' does not match"),
    # checkpoints that no job could load
    (lambda c: c["datasets"]["toy"].update(checkpoints={"src": "../../../tmp/x"}),
     "config key 'datasets.toy.checkpoints.src': checkpoint directory '../../../tmp/x' does "
     "not exist"),
    (lambda c: c["datasets"]["toy"]["overrides"]["bert-init"].update(src_bert="/etc"),
     "run toy/bert-init, src_bert: checkpoint directory '/etc' holds no config.json"),
    # finite numbers the trainer cannot use: lr 0 all along, Adam's overflow or refusal,
    # torch's seed range
    (lambda c: c["defaults"].update(warmup_updates=0),
     "config key 'defaults.warmup_updates': 0 is less than the minimum of 1"),
    (lambda c: c["defaults"].update(lr=1e300),
     "config key 'defaults.lr': 1e+300 is greater than the maximum of 10"),
    (lambda c: c["defaults"].update(warmup_init_lr=1e300),
     "config key 'defaults.warmup_init_lr': 1e+300 is greater than the maximum of 10"),
    (lambda c: c["defaults"].update(adam_betas=[1.5, 0.98]),
     "config key 'defaults.adam_betas.0': 1.5 is greater than or equal to the maximum of 1"),
    (lambda c: c.update(seeds=[2 ** 64]),
     "config key 'seeds.0': 18446744073709551616 is greater than the maximum of 4294967295"),
    # a smoothing of 1 gives the gold token a negative weight; a dropout of 1 zeroes every
    # activation; a seed listed twice would count one run as two seeds
    (lambda c: c["defaults"].update(label_smoothing=1.0),
     "config key 'defaults.label_smoothing': 1.0 is greater than or equal to the maximum of 1"),
    (lambda c: c["defaults"].update(dropout=1),
     "config key 'defaults.dropout': 1 is greater than or equal to the maximum of 1"),
    (lambda c: c.update(seeds=[1, 1]), "config key 'seeds': [1, 1] has non-unique elements"),
    # a table listed twice would be built twice; a divergence factor of at most 1 stops a
    # healthy run; a deep fusion that trains no task trains nothing
    (lambda c: c.update(tables=["abnet2020.table1", "abnet2020.table1"]),
     "config key 'tables': ['abnet2020.table1', 'abnet2020.table1'] has non-unique elements"),
    (lambda c: c["defaults"].update(divergence_factor=0.5),
     "config key 'defaults.divergence_factor': 0.5: a factor of at most 1 stops at the first "
     "update whose loss is above its running level; use a factor above 1, or 0 to disable"),
    (lambda c: c.setdefault("experiments", {}).update({"df": {"method": "deep-fusion",
                                                              "losses": []}}),
     "config key 'experiments.df.losses': [] should be non-empty"),
    # latency times more test sentences than the toy world has: the job would time fewer
    (lambda c: c.update(tables=["abnet2020.table1"], analysis={**c["analysis"],
                                                               "latency_sentences": 500}),
     "config key 'analysis.latency_sentences': abnet2020.table1 column 'latency' times 500 "
     "test sentences of dataset 'toy' after 5 warm-up ones, more than its 500 (config key "
     "'datasets.toy.world.test_pairs')"),
    # a length cap of 0 tokens: every hypothesis empty
    (lambda c: c.update(decode={"max_len_a": 0, "max_len_b": 0}),
     "run toy/transformer-tiny (transformer-base): decode keys 'max_len_a' and 'max_len_b' "
     "are both 0: every hypothesis would be empty"),
    # averaging more epoch checkpoints than the run keeps: found after training otherwise
    (lambda c: c.update(decode={"average_last": 50}),
     "run toy/transformer-tiny (transformer-base): decode key 'average_last' 50 averages "
     "more epoch checkpoints than the run keeps (10: max_epochs 10, keep_last_epochs 10)"),
    # ... or update checkpoints: none kept, or fewer saved than averaged before max_updates
    (lambda c: c.update(decode={"average_last": 3, "average_of": "updates"}),
     "run toy/transformer-tiny (transformer-base): decode key 'average_last' 3 averages "
     "more update checkpoints than the run keeps (0: keep_interval_updates 0, "
     "save_interval_updates 100, max_updates 0)"),
    (lambda c: (c.update(decode={"average_last": 3, "average_of": "updates"}),
                c["defaults"].update(keep_interval_updates=5, save_interval_updates=100,
                                     max_updates=250)),
     "run toy/transformer-tiny (transformer-base): decode key 'average_last' 3 averages "
     "more update checkpoints than the run keeps (2: keep_interval_updates 5, "
     "save_interval_updates 100, max_updates 250)"),
    (lambda c: c.update(decode={"average_of": "steps"}),
     "config key 'decode.average_of': 'steps' is not one of ['epochs', 'updates']"),
    (lambda c: c["pretraining"]["toy-bert-src"].update(layers="x"),
     "config key 'pretraining.toy-bert-src.layers': 'x' is not of type 'integer'"),
    (lambda c: c["pretraining"]["toy-bert-src"].update(max_updates=-3),
     "config key 'pretraining.toy-bert-src.max_updates': -3 is less than the minimum of 1"),
    # a negative loss weight trains the model to get worse; BERT-KD's alpha weighs its two
    # terms and is not sidestepped
    (lambda c: _experiment(c, loss_weights={"tokens": -5}),
     "config key 'experiments.transformer-tiny.loss_weights.tokens': -5 is less than the "
     "minimum of 0"),
    (lambda c: c["datasets"]["toy"]["overrides"]["bert-kd"].update(loss_weights={"bidi": 0.3}),
     "config key 'datasets.toy.overrides.bert-kd.loss_weights': 'bidi': alpha weighs the "
     "terms bidi and tokens; set alpha"),
    # a weight of a term the method's models do not give would weigh nothing (a typo)
    (lambda c: _experiment(c, loss_weights={"token": 0.5}),
     "config key 'experiments.transformer-tiny.loss_weights': 'token' is not a loss term of "
     "method 'transformer' (its terms: tokens)"),
    (lambda c: c["defaults"].update(loss_weights={"length": 0.5}),
     "config key 'defaults.loss_weights': 'length' is not a loss term of method "
     "'transformer' (its terms: tokens)"),
    (lambda c: c["datasets"]["toy"]["overrides"]["cmlm"].update(loss_weights={"lenght": 1}),
     "config key 'datasets.toy.overrides.cmlm.loss_weights': 'lenght' is not a loss term of "
     "method 'cmlm' (its terms: tokens, length)"),
    # a vocabulary is a checkpoint's name: checked where it is planned, not in a job
    (lambda c: c["datasets"]["toy"]["overrides"]["bert-kd"].update(vocabulary="a b;c"),
     "run toy/bertkd-kd-deen, vocabulary (src): checkpoint 'a b;c' is neither a hub name nor "
     "a local directory"),
    (lambda c: c["datasets"]["toy"]["overrides"]["bert-kd"].update(vocabulary="../x"),
     "run toy/bertkd-kd-deen, vocabulary (src): checkpoint directory '../x' does not exist"),
    # a data-size row asking for more pairs than the world has: it would train on all of them
    (lambda c: (c.update(tables=["toyworld.table1"]), c["datasets"]["toy"]["overrides"].update(
        {"transformer-tiny-500": {"train_pairs": 100000}})),
     "run toy/transformer-tiny-500: train_pairs 100000 is more than the 2000 training pairs of "
     "its toy world (config key 'datasets.toy.world.train_pairs')"),
    # a batch budget below the longest pair kept: such a pair is a batch over the budget
    (lambda c: c["datasets"]["toy"]["overrides"]["transformer"].update(max_tokens=10),
     "config key 'datasets.toy.overrides.transformer.max_tokens': run "
     "toy/deepfusion-transformer-12: max_tokens 10 is less than max_positions 256: a batch "
     "could not hold the longest pair the run keeps"),
    (lambda c: c["pretraining"]["toy-bert-src"].update(max_tokens=100),
     "config key 'pretraining.toy-bert-src': pre-training settings max_tokens 100 is less "
     "than max_positions 256: a batch could not hold the longest sentence it keeps"),
    # a warm-up that falls to its peak rate; a pre-training that holds out all of its text
    # (a joint one reads both sides); a word YAML 1.1 reads as a boolean, said how to write one
    (lambda c: c["defaults"].update(warmup_init_lr=5.0),
     "config key 'defaults.warmup_init_lr': run toy/abnet: warmup_init_lr 5.0 is above lr "
     "0.004: the warm-up would fall to the peak rate, not rise to it"),
    (lambda c: c["pretraining"]["toy-bert-joint"].update(heldout_sentences=100000),
     "config key 'pretraining.toy-bert-joint.heldout_sentences': 100000 held-out sentences "
     "leave none of the 100000 of its toy world's monolingual text to train on (config key "
     "'datasets.toy.world.mono_sentences')"),
    (lambda c: c["datasets"]["toy"].update(lowercase="no"),
     "config key 'datasets.toy.lowercase': 'no' is not of type 'boolean' (the workflow reads "
     "YAML 1.2, where a boolean is true or false and other words are text)"),
    # a toy world's settings that cannot go together: found by the toyworld job otherwise
    (lambda c: c["datasets"]["toy"]["world"].update(min_target_tokens=70),
     "config key 'datasets.toy.world': key 'min_target_tokens': 70 is more than "
     "max_target_tokens (60)"),
    # no sentence of the world in its length range; more than a toy world holds
    (lambda c: c["datasets"]["toy"]["world"].update(min_target_tokens=59),
     "config key 'datasets.toy.world': keys 'min_target_tokens', 'max_target_tokens': no "
     "sentence of 59 to 60 target tokens in 10000 draws"),
    # fewer distinct sentences than its splits ask for (found by the job after 10,000
    # repeated draws otherwise): 10 nouns x 10 verbs x 2 tenses of 3 tokens ("nouns verb .")
    (lambda c: c["datasets"]["toy"]["world"].update(max_target_tokens=3, nouns=10,
                                                      intransitive_verbs=10),
     "config key 'datasets.toy.world': key 'train_pairs': the world makes at most 200 "
     "distinct sentences of 3 to 3 target tokens, too few for 2,000 pairs (train); give "
     "it more words, a wider length range or ask for fewer pairs"),
    (lambda c: c["datasets"]["toy"]["world"].update(mono_sentences=9_999_000),
     "config key 'datasets.toy.world': key 'mono_sentences': the world's splits would hold "
     "10,002,000 sentences, more than the 10,000,000 a toy world is generated with (in one "
     "process's memory, about 450 bytes a pair); ask for fewer, or use real data"),
    # more back-translations than the toy world's monolingual text: found in a job otherwise
    (lambda c: c["datasets"]["toy"]["world"].update(mono_sentences=20000),
     "experiment 'abnet-bt-mask-predict-2m' on dataset 'toy': bt_sentences 24000 is more than "
     "the 20000 sentences of its monolingual corpus (config key "
     "'datasets.toy.world.mono_sentences')"),
])
def test_invalid_config_names_the_key(cfg, mutate, message):
    bad = copy.deepcopy(cfg)
    mutate(bad)
    with pytest.raises(InputError) as err:
        nmtconfig.check(bad, SCHEMA)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


# --- the papers' BLEU records against the datasets that score their columns ---------------------

def _profile(name: str) -> dict:
    return nmtconfig.load_config([DEFAULT, ROOT / "config" / name])


@pytest.mark.parametrize("profile", ["paper.yaml", "multi30k.yaml", "multi30k-all.yaml",
                                     "quick-real.yaml"])
def test_the_real_data_profiles_score_bleu_as_their_papers_did(profile):
    plan = nmtconfig.check(_profile(profile), SCHEMA)
    assert plan.tables


def test_the_toy_world_scores_as_it_is(cfg):
    """The default maps IWSLT14, whose papers scored lowercased text, onto the cased toy
    world: a generated dataset is not held to a paper's scoring."""
    assert cfg["dataset_map"]["iwslt14-de-en"] == "toy" and not cfg["datasets"]["toy"]["lowercase"]
    cfg["tables"] = ["abnet2020.table3b"]  # IWSLT14 De-En, case-insensitive in the paper
    nmtconfig.check(cfg, SCHEMA)


@pytest.mark.parametrize("profile, dataset, key, value, message", [
    # BERT-KD splits compounds on WMT14 En-De (its footnote 4)
    ("paper.yaml", "wmt14-en-de", "compound_split", False,
     "bertkd2020.yaml: key 'tables.table3.bleu.compound_split': bertkd2020.table3 reports "
     "BLEU with compound_split true on wmt14-en-de, but config key "
     "'datasets.wmt14-en-de.compound_split' is false; set it to true, or map wmt14-en-de to a "
     "dataset scored that way"),
    # AB-Net's IWSLT14 De-En column alone is case-insensitive (a column's own record)
    ("paper.yaml", "iwslt14-de-en", "lowercase", False,
     "abnet2020.yaml: key 'tables.table1.bleu.columns.iwslt14_de_en.case': abnet2020.table1 "
     "reports BLEU with case lowercased on iwslt14-de-en, but config key "
     "'datasets.iwslt14-de-en.lowercase' is false; set it to true"),
    ("paper.yaml", "wmt16-ro-en", "lowercase", True,
     "abnet2020.yaml: key 'tables.table1.bleu.case': abnet2020.table1 reports BLEU with case "
     "cased on wmt16-ro-en, but config key 'datasets.wmt16-ro-en.lowercase' is true"),
    ("multi30k.yaml", "multi30k-de-en", "lowercase", False,
     "multi30k.yaml: key 'tables.table1.bleu.case': multi30k.table1 reports BLEU with case "
     "lowercased on multi30k-de-en, but config key 'datasets.multi30k-de-en.lowercase' is "
     "false"),
])
def test_a_dataset_scoring_otherwise_than_the_paper_is_refused(profile, dataset, key, value,
                                                               message):
    config = _profile(profile)
    config["datasets"][dataset][key] = value
    with pytest.raises(InputError) as err:
        nmtconfig.check(config, SCHEMA)
    assert str(err.value).startswith(str(PAPERS_DIR / message.split(":", 1)[0]))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_known_but_unimplemented_method_is_not_an_error(cfg, tmp_path):
    # a paper's method with no module yet is "not implemented", not a typo
    papers = tmp_path / "papers"
    shutil.copytree(PAPERS_DIR, papers)
    schema = yaml.safe_load((papers / "schema.yaml").read_text())
    schema["$defs"]["method"]["x-planned"].append("future-method")
    (papers / "schema.yaml").write_text(yaml.safe_dump(schema))
    _experiment(cfg, method="future-method")
    plan = nmtconfig.check(cfg, SCHEMA, papers)
    assert plan.status("transformer-tiny") == "not implemented"
    assert "toy/transformer-tiny" not in _runs(plan)


def _check_edited_toyworld(cfg, tmp_path, old: str, new: str) -> tuple[Path, str]:
    """check() against a copy of papers/ whose toyworld.yaml has `old` replaced by `new`;
    returns that file and the one-line error it must raise."""
    papers = tmp_path / "papers"
    shutil.copytree(PAPERS_DIR, papers)
    toy = papers / "toyworld.yaml"
    assert old in toy.read_text()
    toy.write_text(toy.read_text().replace(old, new))
    with pytest.raises(InputError) as err:
        nmtconfig.check(cfg, SCHEMA, papers)
    return toy, str(err.value)


def test_a_bad_paper_file_stops_check_with_its_name(cfg, tmp_path):
    bad, error = _check_edited_toyworld(cfg, tmp_path, "baseline: transformer-tiny-500",
                                        "baseline: transformer-tiny-5000")
    assert error.startswith(f"{bad}: key 'tables.table1.baseline'")


def test_a_paper_experiment_key_error_names_the_paper_file(cfg, tmp_path):
    paper, error = _check_edited_toyworld(cfg, tmp_path, "    train_pairs: 500\n",
                                          "    train_pair: 500\n")
    assert error == (f"{paper}: key 'experiments.transformer-tiny-500.train_pair' "
                              "is not a setting of the trainer or of method 'transformer'")


def test_snakemake_prints_one_line_for_a_bad_config(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--directory", str(tmp_path),
         "--snakefile", str(ROOT / "Snakefile"), "--configfile", str(DEFAULT),
         "--config", "seeds=oops"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "config" in line]
    assert lines == ["config error: config key 'seeds': 'oops' is not of type 'array'"]
    assert "Traceback" not in result.stderr


def test_a_dataset_named_as_a_command_runs_nothing(tmp_path):
    """A toy world named `$(touch ...)` (its rule's own wildcard constraint lists the toy
    worlds' names) is refused before any job; no shell ever sees the name."""
    pwned = tmp_path / "pwned"
    name = f"$(touch {pwned})"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"tables": ["toyworld.table1"], "dataset_map": {"toy": name},
                                   "datasets": {name: {"kind": "toyworld", "world": {
                                       "train_pairs": 5, "valid_pairs": 5, "test_pairs": 5,
                                       "mono_sentences": 5}, "vocab_size": {"src": 50, "tgt": 50},
                                       "lowercase": False, "detok_lang": "en"}}}))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(tmp_path),
         "--snakefile", str(ROOT / "Snakefile"), "--configfile", str(DEFAULT), str(bad),
         "--until", "toyworld"], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if "error" in line]
    assert lines == [f"config error: config key 'datasets': {name!r} is not a name ({NAME_RULE})"]
    assert "Traceback" not in result.stderr
    assert not pwned.exists() and not (tmp_path / "data").exists()


# --- load_config ---------------------------------------------------------------------------

def test_load_config_merges_recursively_like_configfile(tmp_path):
    base = tmp_path / "base.yaml"
    over = tmp_path / "over.yaml"
    base.write_text("tables: [a, b]\nseeds: [1]\n"
                    "datasets:\n  toy:\n    world: {seed: 1, train_pairs: 4000}\n"
                    "    lowercase: false\n"
                    "decode: {beam: 5, lenpen: 1.0}\n")
    over.write_text("tables: [c]\n"
                    "datasets:\n  toy:\n    world: {train_pairs: 300}\n  other: {kind: x}\n"
                    "decode: {beam: 2}\n")
    assert nmtconfig.load_config([base, over]) == {
        "tables": ["c"],  # lists are replaced, not appended
        "seeds": [1],  # untouched keys stay
        "datasets": {"toy": {"world": {"seed": 1, "train_pairs": 300},  # merged two deep
                             "lowercase": False},
                     "other": {"kind": "x"}},
        "decode": {"beam": 2, "lenpen": 1.0},
    }
    # the later file wins, so order matters
    assert nmtconfig.load_config([over, base])["tables"] == ["a", "b"]
    empty = tmp_path / "empty.yaml"  # Snakemake refuses it: so does `nmtbench check`
    empty.write_text("")
    with pytest.raises(InputError, match=f"^{empty}: a config file must hold a mapping, not "
                                         "nothing$"):
        nmtconfig.load_config([base, empty])


def test_load_config_errors_name_the_file(tmp_path):
    missing = tmp_path / "missing.yaml"
    with pytest.raises(InputError, match=f"^{missing}: cannot read"):
        nmtconfig.load_config([missing])
    broken = tmp_path / "broken.yaml"
    broken.write_text("seeds: [1\n")
    with pytest.raises(InputError) as err:
        nmtconfig.load_config([broken])
    # one line (PyYAML's own spans five); libyaml's words, as the config is read with it
    assert str(err.value) == f"{broken}: line 2: invalid YAML (did not find expected ',' or ']')"
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"seeds: [1]\n# caf\xe9\n")
    with pytest.raises(InputError, match=f"^{latin}: not valid UTF-8$"):
        nmtconfig.load_config([latin])
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(InputError, match=f"^{listed}: a config file must hold a mapping"):
        nmtconfig.load_config([listed])


def test_the_declared_settings_are_the_schema_as_yaml_safe_load_reads_it():
    """`definitions()` (every job that imports the settings reads it) parses with libyaml
    where PyYAML has it: the same document as yaml.safe_load."""
    from nmtbench.workflow.schema import SCHEMA, definitions

    assert definitions() == yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))["$defs"]


def test_smoke_config_shrinks_sizes_and_trains_every_method_of_the_default():
    default_cfg = nmtconfig.load_config([DEFAULT])
    smoke_cfg = nmtconfig.load_config([DEFAULT, SMOKE])
    smoke = nmtconfig.check(smoke_cfg, SCHEMA)
    default = nmtconfig.check(default_cfg, SCHEMA)

    def methods(plan):
        return {plan.run_settings(dataset, run, 1)["method"] for dataset, run in plan.runs()}

    assert methods(smoke) == methods(default)  # every method family of the default runs
    # the tables it keeps plan the same runs as the default plans for them
    default_cfg["tables"] = smoke_cfg["tables"]
    assert _runs(smoke) == _runs(nmtconfig.check(default_cfg, SCHEMA))
    assert smoke_cfg["datasets"]["toy"]["lowercase"] is False  # kept from config.yaml
    assert smoke_cfg["datasets"]["toy"]["world"]["train_pairs"] == 300
    settings = smoke.train_settings("toy", "transformer-tiny-500", seed=1)
    assert settings["train_pairs"] == 100  # smoke's experiments: entry over the paper's 500
    assert settings["encoder_layers"] == 1 and settings["size"] == "tiny"
    assert settings["max_epochs"] == 2 and settings["lr"] == 0.002  # defaults merged


# --- resolved training settings ------------------------------------------------------------

def test_train_settings_order_defaults_experiment_overrides_seed(cfg):
    cfg["defaults"].update(seed=11, dropout=0.3, lr=0.003)
    cfg["experiments"] = {"transformer-tiny-500": {"lr": 0.01, "dropout": 0.2, "seed": 3,
                                                   "decode": {"beam": 2}}}
    cfg["datasets"]["toy"]["overrides"]["transformer"] = {"size": "tiny", "dropout": 0.05}
    plan = nmtconfig.check(cfg, SCHEMA)
    resolved = plan.train_settings("toy", "transformer-tiny-500", seed=7)
    assert resolved["max_tokens"] == cfg["defaults"]["max_tokens"]  # defaults
    assert resolved["lr"] == 0.01  # experiment (config) over defaults
    assert resolved["train_pairs"] == 500  # experiment (paper)
    assert resolved["dropout"] == 0.05  # dataset override over experiment and defaults
    assert resolved["seed"] == 7  # the run's seed over everything
    assert resolved["method"] == "transformer"
    assert "description" not in resolved and "decode" not in resolved
    assert plan.train_settings("toy", "transformer-tiny-500")["seed"] == 3
    assert plan.decode_settings("toy", "transformer-tiny-500").beam == 2
    assert nmtconfig.as_json(resolved) == nmtconfig.as_json(dict(reversed(resolved.items())))


def test_seeds_from_the_command_line_become_integers(cfg):
    """`snakemake --config seeds=[1,2]` passes the strings '1' and '2'."""
    cfg["seeds"] = ["1", "2"]
    assert nmtconfig.check(cfg, SCHEMA).seeds == [1, 2]
    assert cfg["seeds"] == [1, 2]


@pytest.mark.parametrize("decode, message", [
    ("{beem: 4}", "decode': Additional properties are not allowed ('beem'"),
    ("{beam: 0}", "decode.beam': 0 is less than the minimum of 1"),
])
def test_decode_settings_in_paper_files_are_checked(cfg, tmp_path, decode, message):
    """The paper schema leaves `decode` open; check() holds it to the config's decode schema."""
    toy, error = _check_edited_toyworld(cfg, tmp_path, "    train_pairs: 500\n",
                                        f"    train_pairs: 500\n    decode: {decode}\n")
    assert error.startswith(f"{toy}: key 'experiments.transformer-tiny-500.decode")
    assert message in error


def test_decode_overrides_of_a_dataset_are_checked(cfg):
    cfg["datasets"]["toy"]["overrides"]["transformer"]["decode"] = {"lenpen_form": "gmnt"}
    with pytest.raises(InputError, match=r"datasets\.toy\.overrides\.transformer\.decode\."
                                         r"lenpen_form': 'gmnt' is not one of"):
        nmtconfig.check(cfg, SCHEMA)


def test_a_dataset_checkpoint_fills_the_bert_role_and_the_tokenizer(cfg):
    """A side's checkpoint is the default BERT of that side; the experiment's own wins."""
    cfg["datasets"]["toy"]["checkpoints"] = {"src": "bert-base-german-cased"}
    del cfg["datasets"]["toy"]["overrides"]["bert-init"]
    plan = nmtconfig.check(cfg, SCHEMA)
    assert plan.checkpoints("toy", "bert-init") == {"src_bert": "bert-base-german-cased"}
    # bertfused names bert-base-uncased itself, so it no longer shares bert-init's run
    run = plan.cell("toy", "bertfused-bert-init-encoder", "test").run
    assert plan.checkpoints("toy", run) == {"src_bert": "bert-base-uncased"}
    assert plan.checkpoints("toy", "transformer-tiny") == {}


# --- init_from: a warm start from another experiment's run ---------------------------------

def test_init_from_trains_the_parent_first_and_passes_its_checkpoint(cfg):
    cfg["tables"] = ["toyworld.table1"]
    cfg["experiments"] = {"warm": {"method": "transformer", "size": "tiny", "max_epochs": 2,
                                   "init_from": {"experiment": "transformer-tiny",
                                                 "checkpoint": "last"}}}
    plan = nmtconfig.check(cfg, SCHEMA)
    (warm,) = plan.run_inputs("toy", "warm").values()
    parent = plan.run_cell("toy", "transformer-tiny", "x")
    assert warm.name == "init_from"
    assert warm.path(2) == f"{parent.run_dir(2)}/checkpoints/last.pt"
    assert warm.needs(2) == f"{parent.run_dir(2)}/train_summary.json"  # the DAG's dependency
    assert plan.run_settings("toy", "warm", 2)["init_from"] == {
        "experiment": "transformer-tiny", "checkpoint": "last"}
    # otherwise equal settings: a warm-started run is a run of its own
    cfg["experiments"]["cold"] = {"method": "transformer", "size": "tiny", "max_epochs": 2}
    plan = nmtconfig.check(cfg, SCHEMA)
    assert plan.run_cell("toy", "warm", "x").run == "warm"
    assert plan.run_cell("toy", "cold", "x").run == "cold"
    assert plan.run_inputs("toy", "cold") == {}


@pytest.mark.parametrize("init_from, message", [
    ({"experiment": "no-such"},
     "config key 'experiments.warm.init_from.experiment': 'no-such' is not an implemented "
     "experiment"),
    ({"experiment": "bertfused-xlm-init-encoder"},  # a paper's, quoted from other work
     "config key 'experiments.warm.init_from.experiment': 'bertfused-xlm-init-encoder' is "
     "not an implemented experiment"),
    ({"experiment": "transformer-tiny", "checkpoint": "first"},
     "config key 'experiments.warm.init_from.checkpoint': 'first' is not one of"),
    ({"checkpoint": "best"}, "config key 'experiments.warm.init_from': 'experiment' is a "
     "required property"),
    ("transformer-tiny", "config key 'experiments.warm.init_from': 'transformer-tiny' is not "
     "of type 'object'"),
    ({"experiment": "warm"},
     "config key 'experiments.warm.init_from.experiment': runs learning from each other form a "
     "cycle (warm -> warm)"),
])
def test_a_bad_init_from_names_the_key(cfg, init_from, message):
    cfg["experiments"] = {"warm": {"method": "transformer", "init_from": init_from}}
    with pytest.raises(InputError) as err:
        nmtconfig.check(cfg, SCHEMA)
    assert message in str(err.value)


def test_a_missing_parent_down_a_chain_is_named_where_it_is_written(cfg):
    """A NAT run learns from the dataset's sequence_distillation teacher, whose init_from
    names no experiment: the line names the teacher's init_from, not the dataset's key the
    chain starts at (only a cycle is named there)."""
    cfg["tables"] = ["abnet2020.table1"]
    cfg["datasets"]["toy"]["sequence_distillation"] = "transformer-tiny"
    cfg["experiments"] = {"transformer-tiny": {"init_from": {"experiment": "no-such"}}}
    with pytest.raises(InputError, match=re.escape(
            "config key 'experiments.transformer-tiny.init_from.experiment': 'no-such' is not "
            "an implemented experiment on dataset 'toy'")):
        nmtconfig.check(cfg, SCHEMA)


def _loading(mutate):
    def apply(c):
        c.setdefault("experiments", {})
        mutate(c)
    return apply


@pytest.mark.parametrize("mutate, message", [
    # a teacher is no model's warm start, and takes none itself
    (_loading(lambda c: c["experiments"].update(
        warm={"method": "transformer", "init_from": {"experiment": "bertkd-teacher-mbert"}})),
     "config key 'experiments.warm.init_from.experiment': 'bertkd-teacher-mbert' is a "
     "teacher, whose weights no model loads"),
    (_loading(lambda c: c["experiments"].update(
        {"bertkd-teacher-mbert": {"init_from": {"experiment": "transformer-tiny"}}})),
     "config key 'experiments.bertkd-teacher-mbert.init_from' is not read by method "
     "'bert-kd-teacher' (a teacher starts from the BERT it fine-tunes)"),
    # a teacher run is one run: no seed offset, no checkpoint choice to ignore
    (_loading(lambda c: c["experiments"].update(
        {"bertkd-kd-deen": {"teacher": {"experiment": "bertkd-teacher-mbert",
                                        "seed_offset": 7}}})),
     "config key 'experiments.bertkd-kd-deen.teacher': Additional properties are not "
     "allowed ('seed_offset' was unexpected)"),
    # written under defaults or a dataset's overrides, checked as under experiments
    (_loading(lambda c: c["datasets"]["toy"].setdefault("overrides", {}).update(
        {"transformer": {"init_from": {"experiment": "no-such"}}})),
     "config key 'datasets.toy.overrides.transformer.init_from.experiment': 'no-such' is not "
     "an implemented experiment on dataset 'toy'"),
    (_loading(lambda c: c["defaults"].update(init_from={"experiment": "transformer-tiny"})),
     "config key 'defaults.init_from' is not read by method 'bert-kd-teacher'"),
    (_loading(lambda c: c["datasets"]["toy"].setdefault("overrides", {}).update(
        {"transformer-tiny": {"init_from": {"experiment": "transformer-tiny"}}})),
     "config key 'datasets.toy.overrides.transformer-tiny.init_from.experiment': runs "
     "learning from each other form a cycle (transformer-tiny -> transformer-tiny)"),
])
def test_runs_loaded_are_checked_wherever_written(cfg, mutate, message):
    mutate(cfg)
    with pytest.raises(InputError) as err:
        nmtconfig.check(cfg, SCHEMA)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_chain_of_warm_starts_may_not_come_back(cfg):
    cfg["experiments"] = {
        "a": {"method": "transformer", "init_from": {"experiment": "b"}},
        "b": {"method": "transformer", "init_from": {"experiment": "c"}},
        "c": {"method": "transformer", "init_from": {"experiment": "a"}},
    }
    with pytest.raises(InputError, match=r"'experiments\.a\.init_from\.experiment': runs "
                       r"learning from each other form a cycle \(a -> b -> c -> a\)"):
        nmtconfig.check(cfg, SCHEMA)


# --- the schema's settings and their sources -----------------------------------------------

def test_the_schemas_trainer_settings_are_train_configs_fields():
    from dataclasses import fields

    from nmtbench.workflow.train_settings import TrainConfig

    trainer = yaml.safe_load(SCHEMA.read_text())["$defs"]["trainer"]["properties"]
    assert set(trainer) == {f.name for f in fields(TrainConfig)}


def test_the_schemas_toy_world_keys_are_world_config_fields_and_split_sizes():
    from dataclasses import fields

    from nmtbench.data.toyworld import WorldConfig

    world = yaml.safe_load(SCHEMA.read_text())["properties"]["datasets"][
        "additionalProperties"]["properties"]["world"]
    sizes = {"train_pairs", "valid_pairs", "test_pairs", "mono_sentences"}
    optional = {"test_official_pairs"}  # the second test set, made only where asked for
    assert set(world["properties"]) == {f.name for f in fields(WorldConfig)} | sizes | optional
    assert set(world["required"]) == sizes


def test_the_schemas_decode_keys_are_decode_settings_fields():
    from dataclasses import fields

    from nmtbench.workflow.decode_settings import DecodeSettings

    decode = yaml.safe_load(SCHEMA.read_text())["$defs"]["decode"]["properties"]
    assert set(decode) == {f.name for f in fields(DecodeSettings)} - {"decoding"}


def test_the_papers_metrics_are_the_registrys():
    from nmtbench.workflow.metric_registry import METRICS

    papers = yaml.safe_load((PAPERS_DIR / "schema.yaml").read_text())
    assert papers["$defs"]["metric"]["enum"] == list(METRICS)


def test_the_schema_types_every_pre_training_setting():
    from dataclasses import fields

    from nmtbench.workflow.pretrain_settings import PretrainConfig

    schema = yaml.safe_load(SCHEMA.read_text())
    typed = set(schema["properties"]["pretraining"]["additionalProperties"]["properties"])
    assert typed == {f.name for f in fields(PretrainConfig)} | set(nmtconfig.PRETRAINING_TEXT)


def test_a_checkout_whose_path_holds_a_brace_is_refused_in_one_line(tmp_path):
    """Snakemake would take the brace for a wildcard in the paths of the rules' conda
    environments and stop with a traceback."""
    (tmp_path / "a{b}").mkdir()
    (tmp_path / "a{b}" / "repo").symlink_to(ROOT)
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--directory", str(tmp_path),
         "--snakefile", str(tmp_path / "a{b}" / "repo" / "Snakefile")],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"error: the workflow's path {tmp_path}/a{{b}}/repo holds a brace, which Snakemake "
        "takes for a wildcard; clone it to a path without { or }")


# (the default config file's text, the line that names what is wrong in it)
BROKEN_DEFAULT = {
    "invalid YAML": ("seeds: [1\n", "line 2: invalid YAML (did not find expected ',' or ']')"),
    "a list": ("- 1\n", "a config file must hold a mapping, not a list"),
    "empty": ("# nothing yet\n", "a config file must hold a mapping, not nothing"),
}


@pytest.mark.parametrize("broken", BROKEN_DEFAULT)
def test_a_broken_default_config_is_one_line_naming_it(tmp_path, broken):
    """Snakemake reads the Snakefile's `configfile:` itself, and its error names neither the
    file nor the line: the workflow reads it first, as `nmtbench check` does."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("Snakefile", "rules", "nmtbench", "papers", "envs", "profiles", "report"):
        (repo / name).symlink_to(ROOT / name)
    (repo / "config").mkdir()
    (repo / "config" / "schema.yaml").symlink_to(SCHEMA)
    text, why = BROKEN_DEFAULT[broken]
    (repo / "config" / "config.yaml").write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--directory", str(tmp_path),
         "--snakefile", str(repo / "Snakefile")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert [line for line in result.stderr.splitlines() if "rror" in line] == [
        f"config error: {repo}/config/config.yaml: {why}"], result.stderr


def test_a_key_written_twice_is_refused_where_yaml_would_keep_the_last(tmp_path):
    """YAML readers (Snakemake's too) keep a key's last value without a word; the workflow
    reads the config files it was given again and stops at the first key written twice."""
    twice = tmp_path / "twice.yaml"
    twice.write_text("defaults:\n  max_epochs: 2\n  lr: 0.001\n  max_epochs: 1\n")
    with pytest.raises(InputError) as err:
        nmtconfig.load_config([twice])
    assert str(err.value) == (f"{twice}: line 4: invalid YAML (key 'max_epochs' is written "
                              "twice in one mapping)")
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--directory", str(tmp_path),
         "--snakefile", str(ROOT / "Snakefile"), "--configfile", str(DEFAULT), str(twice)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert [line for line in result.stderr.splitlines() if "error" in line] == [
        f"config error: {err.value}"]
    twice.write_text("defaults: &d {max_epochs: 2}\nother: {<<: *d, max_epochs: 1}\n")
    assert nmtconfig.load_config([twice])["other"] == {"max_epochs": 1}  # overriding a merge


# (Snakemake's command line after `snakemake`, the line it is refused with; None: read)
COMMAND_LINES = [
    (["--configfile", "a.yaml", "b.yaml"], None),
    (["--configfile", "a.yaml", "--configfile", "b.yaml"],
     "--configfile is given 2 times: Snakemake reads only the last one's files; give them all "
     "after one --configfile"),
    (["--configfiles=a.yaml", "-n", "--configfi", "b.yaml"],  # argparse takes abbreviations
     "--configfile is given 2 times: Snakemake reads only the last one's files; give them all "
     "after one --configfile"),
    (["--config", "seeds=[1]", "tables=[t]", "--cores", "1"], None),
    (["--config", "seeds=[1]", "-C", "tables=[t]"],
     "--config is given 2 times: Snakemake reads only the last one's values; give them all "
     "after one --config"),
    (["-Cseeds=[1]", "--config=tables=[t]"],
     "--config is given 2 times: Snakemake reads only the last one's values; give them all "
     "after one --config"),
    (["--config", "seeds=[1]", "seeds=[2]"],
     "--config: key 'seeds' is given 2 times; Snakemake would keep its last value"),
    (["--config", "analysis={bootstrap_samples: 10}", "analysis={latency_sentences: 5}"], None),
]


@pytest.mark.parametrize(("argv", "refused"), COMMAND_LINES)
def test_a_config_flag_or_key_given_twice_on_the_command_line_is_refused(argv, refused):
    """Snakemake keeps the last of two --configfile or --config flags, dropping the files
    or values of the others, and the last value of a key given twice: never silently."""
    if refused is None:
        nmtconfig.check_command_line(argv)
    else:
        with pytest.raises(InputError, match=f"^{re.escape(refused)}$"):
            nmtconfig.check_command_line(argv)


def test_the_workflow_refuses_a_second_configfile_flag(tmp_path):
    table = tmp_path / "table.yaml"
    table.write_text("tables: [toyworld.table1]\n")
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "--directory", str(tmp_path),
         "--snakefile", str(ROOT / "Snakefile"), "--configfile", str(ROOT / "config" /
                                                                     "smoke.yaml"),
         "--configfile", str(table)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "config error: --configfile is given 2 times: Snakemake reads only the last one's "
        "files; give them all after one --configfile")


def test_nmtbench_reads_the_files_of_every_configfile_flag(tmp_path):
    from nmtbench import cli

    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text("seeds: [5]\n")
    second.write_text("tables: [toyworld.table1]\n")
    args = cli.parser().parse_args(["check", "--configfile", str(first), "--configfile",
                                    str(second), "--root", str(ROOT)])
    assert args.configfile == [str(first), str(second)]
    plan = cli._checked_plan(args)
    assert plan.seeds == [5] and plan.config["tables"] == ["toyworld.table1"]


def test_a_yaml_alias_of_a_mapping_is_refused_before_merging(tmp_path):
    """One mapping under two keys: a config merged over it (Snakemake's --configfile, in
    place) would change both keys; a copy (`{<<: *name}`) is fine."""
    aliased = tmp_path / "aliased.yaml"
    aliased.write_text("datasets:\n  toy:\n    overrides:\n      transformer: &t {dropout: 0.1}\n"
                       "      transformer-tiny: *t\n")
    with pytest.raises(InputError, match=r"aliased\.yaml: keys 'datasets\.toy\.overrides\."
                       r"transformer' and 'datasets\.toy\.overrides\.transformer-tiny' are "
                       r"one YAML alias"):
        nmtconfig.load_config([ROOT / "config" / "config.yaml", aliased])
    aliased.write_text("datasets:\n  toy:\n    overrides:\n      transformer: &t {dropout: 0.1}\n"
                       "      transformer-tiny: {<<: *t}\n")
    merged = nmtconfig.load_config([ROOT / "config" / "config.yaml", aliased])
    overrides = merged["datasets"]["toy"]["overrides"]
    assert overrides["transformer-tiny"] == overrides["transformer"]
    assert overrides["transformer-tiny"] is not overrides["transformer"]


def test_a_parent_run_seed_beyond_the_largest_seed_is_refused_at_planning(cfg):
    """BERT-fused's encoder-as-BERT run loads a Transformer trained at seed + 1000: with the
    largest seed that seed does not exist, refused before any job (not when it trains)."""
    cfg["tables"] = ["bertfused2020.table6"]
    cfg["seeds"] = [4294967295]
    with pytest.raises(InputError, match=r"^config key 'seeds': seed 4294967295 plus the "
                       r"seed_offset 1000 of run toy/\S+'s features_from exceeds the largest "
                       r"seed, 4294967295$"):
        nmtconfig.check(cfg, SCHEMA)
    cfg["seeds"] = [4294966295]
    nmtconfig.check(cfg, SCHEMA)
