"""The plan: requested tables -> cells -> shared runs, decode tags and the files rule all needs."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from nmtbench.errors import InputError
from nmtbench.workflow import config as nmtconfig
from nmtbench.workflow.decode_settings import DecodeSettings
from nmtbench.workflow.method_registry import MethodInfo, method_infos
from nmtbench.workflow.papers import PAPERS_DIR, load_catalogue
from nmtbench.workflow.plan import EXTERNAL, NOT_IMPLEMENTED, Plan

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
METHODS = method_infos(SCHEMA["$defs"])
TAG = re.compile(r"[A-Za-z0-9-]+")  # the `tag` wildcard constraint of rules/common.smk

MINI = """
paper: mini
title: A paper made for these tests
source: tests/workflow/test_plan.py
experiments:
  base: {method: transformer, size: base}
  base-again: {method: transformer, size: base, description: trains exactly like base}
  base-beam2: {method: transformer, size: base, decode: {beam: 2, lenpen: 0.6}}
  big: {method: transformer, size: big}
  tiny: {method: transformer, size: tiny}
  half-data: {method: transformer, size: base, train_pairs: 100}
  nat: {method: future-method, bert_layer: last}
  quoted: {method: external}
  bt: {method: transformer, size: base, published_back_translations: true}
tables:
  table1:
    caption: every metric kind, with a baseline
    baseline: base
    bleu: &unstated {kind: unknown, tokenizer: unknown, case: unknown, compound_split: unknown,
                     where: not stated}
    columns:
      bleu: {label: BLEU, dataset: iwslt14-de-en, split: test, metric: bleu_tokenized}
      sacre: {label: sacreBLEU, dataset: iwslt14-de-en, split: test, metric: sacrebleu}
      params: {label: Params, dataset: iwslt14-de-en, split: valid, metric: params_trained}
      latency: {label: Latency, dataset: iwslt14-de-en, split: test, metric: latency_ms}
      speedup: {label: Speedup, dataset: iwslt14-de-en, split: test, metric: speedup}
    rows:
      - {experiment: base, label: Base, reported: {bleu: 30.0}}
      - {experiment: half-data, label: Half, reported: {}}
      - {experiment: base-beam2, label: Beam 2, reported: {}}
      - {experiment: base-again, label: Again, reported: {}}
      - {experiment: nat, label: NAT, reported: {}}
      - {experiment: quoted, label: Quoted, reported: {bleu: 29.0}}
      - {experiment: bt, label: BT, reported: {}}
  table2:
    caption: a mapped dataset, no baseline
    bleu: *unstated
    columns:
      en_de: {label: En-De, dataset: wmt14-en-de, split: test, metric: bleu_tokenized}
    rows:
      - {experiment: big, label: Big, reported: {en_de: 28.4}}
  table3:
    caption: a baseline that is not implemented
    baseline: nat
    columns:
      bleu: {label: BLEU, dataset: iwslt14-de-en, split: test, metric: bleu_tokenized}
    rows:
      - {experiment: nat, label: NAT, reported: {}}
      - {experiment: half-data, label: Half, reported: {}}
  table4:
    caption: speedup only
    baseline: base
    columns:
      speedup: {label: Speedup, dataset: iwslt14-de-en, split: test, metric: speedup}
    rows:
      - {experiment: base, label: Base, reported: {speedup: 1.0}}
      - {experiment: half-data, label: Half, reported: {speedup: 1.5}}
  table5:
    caption: a row trained on a dataset of its own (as WMT16 Ro-En with back-translations)
    baseline: base
    bleu: *unstated
    columns:
      bleu: {label: BLEU, dataset: iwslt14-de-en, split: test, metric: bleu_tokenized}
    rows:
      - {experiment: base, label: Base, reported: {bleu: 30.0}}
      - {experiment: half-data, label: Half, reported: {}}
      - {experiment: big, label: Big, reported: {bleu: 31.0}, trained_on: wmt14-en-de}
claims:
  - {claim: half the data beats beam 2, source: nowhere, table: table1, row: half-data,
     than: base-beam2}
  - {claim: half the data is faster, source: nowhere, table: table1, columns: [speedup],
     row: half-data, above: 1.0}
figures:
  figure1:
    kind: sweep
    caption: data size
    dataset: iwslt14-de-en
    split: test
    x: {label: pairs, values: [100, 160000]}
    experiments: [half-data, base]
    y: bleu_tokenized
    y2: latency_ms
  figure2:
    kind: curve
    caption: curves
    dataset: iwslt14-de-en
    split: valid
    series: {base: Base, nat: NAT}
    axis: epoch
  figure3:
    kind: buckets
    caption: by length
    dataset: iwslt14-de-en
    split: valid
    series: {base: Base, base-beam2: Beam 2}
    bucket_cutoffs: [10, 20]
"""

T5 = "beam5-lp1-fairseq-best"  # the config's decoding
T2 = "beam2-lp0p6-fairseq-best"  # base-beam2's own
IW = "results/runs/iwslt14-de-en"


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory):
    papers = tmp_path_factory.mktemp("papers")
    schema = yaml.safe_load((PAPERS_DIR / "schema.yaml").read_text())
    schema["$defs"]["method"]["x-planned"].append("future-method")  # no code has it yet
    (papers / "schema.yaml").write_text(yaml.safe_dump(schema))
    (papers / "mini.yaml").write_text(MINI)
    return load_catalogue(papers)


def make_config(**changes):
    """A complete config: iwslt14-de-en under its own name, wmt14-en-de mapped to a toy world
    whose Transformers are all `tiny`."""
    cfg = {
        "tables": ["all"],
        "seeds": [1],
        "datasets": {
            "iwslt14-de-en": {"kind": "iwslt14", "src_lang": "de", "tgt_lang": "en",
                              "vocab_size": {"src": 100, "tgt": 100},
                              "lowercase": True, "detok_lang": "en"},
            "toy": {"kind": "toyworld", "vocab_size": {"src": 100, "tgt": 100},
                    "world": {"train_pairs": 100, "valid_pairs": 10, "test_pairs": 10,
                              "mono_sentences": 100},
                    "lowercase": False, "detok_lang": "en",
                    "overrides": {"transformer": {"size": "tiny"}}},
        },
        "dataset_map": {"wmt14-en-de": "toy"},
        "defaults": {"max_epochs": 3, "lr": 0.001},
        "decode": {"beam": 5, "lenpen": 1.0, "lenpen_form": "fairseq", "checkpoint": "best",
                   "average_last": 0},
        "analysis": {"bootstrap_samples": 10, "latency_sentences": 1},
        "resources": {r: {"threads": 1, "mem_mb": 1, "runtime": 1, "gpu": 0}
                      for r in ("train", "decode", "translate")},
    }
    cfg.update(changes)
    return cfg


def plan_for(catalogue, implemented=frozenset({"transformer"}), **changes):
    return Plan(make_config(**changes), catalogue, {
        m: METHODS.get(m, MethodInfo(m, frozenset(), ("at",), {}, ("init_from",), {}))
        for m in implemented})


def run_dirs(targets):
    return {re.match(r"results/runs/([^/]+/[^/]+)/seed\d+/", t).group(1) for t in targets}


def test_hand_made_config_is_schema_valid():
    nmtconfig.validate(make_config(), SCHEMA)


# --- decode tags ---------------------------------------------------------------------------

BASE_DECODE = {"beam": 5, "lenpen": 1.0, "lenpen_form": "fairseq", "checkpoint": "best",
               "average_last": 0}


def decode_tag(settings):
    return DecodeSettings.from_dict(settings).tag


def test_decode_tag_spells_the_settings():
    assert decode_tag({}) == T5  # the defaults
    assert decode_tag(BASE_DECODE) == T5
    assert decode_tag({**BASE_DECODE, "max_len_a": 1.2, "max_len_b": 10}) == T5  # implicit
    assert decode_tag({**BASE_DECODE, "lenpen": 0.6}) == "beam5-lp0p6-fairseq-best"
    assert decode_tag({**BASE_DECODE, "lenpen": -0.5}) == "beam5-lpm0p5-fairseq-best"
    assert decode_tag({**BASE_DECODE, "average_last": 10}) == "beam5-lp1-fairseq-avg10"
    assert decode_tag({**BASE_DECODE, "max_len_a": 1.5}) == f"{T5}-maxlena1p5"
    assert decode_tag({**BASE_DECODE, "max_len_b": 200}) == f"{T5}-maxlenb200"
    assert decode_tag({"decoding": "nat", "average_last": 10}) == "lb4-it10-avg10"
    assert decode_tag({"decoding": "nat", "average_last": 10,
                       "average_of": "updates"}) == "lb4-it10-avg10u"
    assert decode_tag({"decoding": "nat", "length_beam": 3, "iterations": 5,
                       "beam": 2}) == "lb3-it5-best"  # beam search settings do not apply


def test_decode_settings_make_the_commands_options():
    from argparse import ArgumentParser

    from nmtbench.workflow import decode_settings

    settings = DecodeSettings(beam=2, lenpen=0.6, lenpen_form="gnmt", average_last=10,
                              average_of="updates")
    parser = ArgumentParser()
    decode_settings.add_arguments(parser)
    parsed = decode_settings.from_arguments(parser.parse_args(settings.arguments()))
    assert parsed == settings
    assert decode_settings.from_arguments(parser.parse_args([])) == DecodeSettings()


def test_decode_tag_changes_with_every_hypothesis_setting_and_is_file_name_safe():
    variants = [BASE_DECODE] + [{**BASE_DECODE, **change} for change in (
        {"beam": 4}, {"beam": 50}, {"lenpen": 0.6}, {"lenpen": 1.1}, {"lenpen": 0.0},
        {"lenpen": 6.0}, {"lenpen_form": "gnmt"}, {"checkpoint": "last"}, {"average_last": 5},
        {"average_last": 10}, {"average_last": 10, "average_of": "updates"}, {"max_len_a": 0},
        {"max_len_a": 1.5}, {"max_len_b": 0},
        {"max_len_b": 200}, {"lenpen": 0.6, "lenpen_form": "gnmt", "beam": 4},
    )]
    tags = [decode_tag(v) for v in variants]
    assert len(set(tags)) == len(tags), tags
    for tag in tags:
        assert TAG.fullmatch(tag) and "." not in tag, tag
    # averaging ignores which single checkpoint is named, so the tag does too
    assert (decode_tag({**BASE_DECODE, "average_last": 10, "checkpoint": "last"})
            == decode_tag({**BASE_DECODE, "average_last": 10}))
    assert decode_tag({**BASE_DECODE, "average_of": "updates"}) == T5  # nothing averaged


def test_decode_for_tag_gives_back_the_settings(catalogue):
    plan = plan_for(catalogue)
    cell = plan.cell("iwslt14-de-en", "base-beam2", "here")
    assert cell.tag == T2
    settings = plan.decode_for_tag(T2)
    assert settings == DecodeSettings(beam=2, lenpen=0.6, decoding="at")
    assert settings.tag == T2
    with pytest.raises(KeyError):
        plan.decode_for_tag("beam99-lp1-fairseq-best")



def test_a_decoding_takes_the_batch_its_own_dataset_asks_for(catalogue):
    """The tag leaves the batch size out; a dataset's override of it holds for its own
    decodings only, whichever dataset the plan reads last."""
    small = {"iwslt14-de-en": {**make_config()["datasets"]["iwslt14-de-en"],
                               "overrides": {"base": {"decode": {"batch_size": 2}}}}}
    toy = {"toy": make_config()["datasets"]["toy"]}
    for datasets in ({**small, **toy}, {**toy, **small}):
        plan = plan_for(catalogue, datasets=datasets)
        cell = plan.cell("iwslt14-de-en", "base", "here")
        assert plan.decode_batch_size("iwslt14-de-en", cell.run, cell.tag) == 2
        other = plan.cell("wmt14-en-de", "base", "here")
        assert other.tag == cell.tag
        assert plan.decode_batch_size(other.dataset, other.run, other.tag) == 64

# --- datasets ------------------------------------------------------------------------------

def test_dataset_map_maps_paper_datasets(catalogue):
    plan = plan_for(catalogue)
    assert plan.dataset("wmt14-en-de", "x") == "toy"
    assert plan.dataset("iwslt14-de-en", "x") == "iwslt14-de-en"  # configured, unmapped
    (_, _, cell), = plan.table_cells(catalogue.tables["mini.table2"])
    assert cell.dataset == "toy"
    assert {c.dataset for _, _, c in plan.table_cells(catalogue.tables["mini.table1"])} == {
        "iwslt14-de-en"}
    # a difference from the paper means something only on the paper's own data
    assert plan.comparable("iwslt14-de-en", "iwslt14-de-en")
    assert not plan.comparable("wmt14-en-de", "toy")


def test_unmapped_unconfigured_dataset_names_table_and_dataset(catalogue):
    plan = plan_for(catalogue, dataset_map={}, tables=["mini.table2"])
    with pytest.raises(InputError) as err:
        plan.targets()
    assert str(err.value) == ("mini.table2 column 'en_de': dataset 'wmt14-en-de' is not "
                              "configured (add it under 'datasets' or map it under "
                              "'dataset_map')")
    # a figure names itself
    datasets = {"toy": make_config()["datasets"]["toy"]}
    plan = plan_for(catalogue, datasets=datasets, tables=["mini.figure3"])
    with pytest.raises(InputError, match=r"^mini\.figure3: dataset 'iwslt14-de-en' is not"):
        plan.targets()
    # mapping onto a dataset that is not configured fails the same way
    plan = plan_for(catalogue, dataset_map={"wmt14-en-de": "wmt"}, tables=["mini.table2"])
    with pytest.raises(InputError, match="dataset 'wmt14-en-de' is not configured"):
        plan.targets()


# --- shared runs ---------------------------------------------------------------------------

def test_equal_training_settings_share_one_run(catalogue):
    plan = plan_for(catalogue)
    cells = {e: plan.cell("iwslt14-de-en", e, "here")
             for e in ("base", "base-again", "base-beam2", "big", "tiny", "half-data")}
    # description and decode do not change training: base, base-again and base-beam2 share
    assert {cells[e].run for e in ("base", "base-again", "base-beam2")} == {"base"}
    assert cells["big"].run == "big" and cells["tiny"].run == "tiny"
    assert cells["half-data"].run == "half-data"
    # ... but a decode change is a different decoding of the same model
    assert cells["base"].tag == cells["base-again"].tag == T5
    assert cells["base-beam2"].tag == T2
    assert cells["base"].run_dir(3) == "results/runs/iwslt14-de-en/base/seed3"
    assert plan.sharing("iwslt14-de-en", "base") == ["base", "base-again", "base-beam2"]
    assert plan.sharing("iwslt14-de-en", "big") == ["big"]


def test_run_is_named_after_the_experiment_that_asks_for_the_resolved_settings(catalogue):
    plan = plan_for(catalogue)
    # on the toy world every Transformer becomes tiny: base, big and tiny train the same model,
    # and the run is `tiny` (its own settings), not the alphabetically first `base`
    for experiment in ("base", "base-again", "base-beam2", "big", "tiny"):
        assert plan.cell("wmt14-en-de", experiment, "here").run == "tiny"
    assert plan.sharing("toy", "tiny") == ["base", "base-again", "base-beam2", "big", "tiny"]
    # half-data resolves to tiny + 100 pairs, which no experiment asks for literally:
    # the group's alphabetically first member names it
    assert plan.cell("wmt14-en-de", "half-data", "here").run == "half-data"
    assert plan.train_settings("toy", "half-data")["size"] == "tiny"
    # not implemented / external experiments are in no run
    assert all(e not in plan.sharing("toy", "tiny") for e in ("nat", "quoted", "bt"))


def test_overrides_that_only_fill_in_settings_keep_the_run_name(catalogue):
    datasets = make_config()["datasets"]
    # like config/smoke.yaml: tiny, and fewer layers than tiny has (no experiment sets layers)
    datasets["toy"]["overrides"]["transformer"].update(encoder_layers=1, decoder_layers=1)
    plan = plan_for(catalogue, datasets=datasets)
    assert plan.cell("wmt14-en-de", "big", "x").run == "tiny"
    assert plan.sharing("toy", "tiny") == ["base", "base-again", "base-beam2", "big", "tiny"]
    # an override that contradicts every member's own settings: alphabetical
    datasets["toy"]["overrides"]["transformer"] = {"size": "huge"}
    plan = plan_for(catalogue, datasets=datasets)
    assert plan.cell("wmt14-en-de", "big", "x").run == "base"
    assert plan.sharing("toy", "base") == ["base", "base-again", "base-beam2", "big", "tiny"]


def test_config_experiments_override_papers_key_by_key(catalogue):
    plan = plan_for(catalogue, experiments={
        "base-again": {"lr": 0.1},  # now trains differently from base
        "base-beam2": {"decode": {"beam": 3}},  # lenpen 0.6 stays
        "base-long": {"method": "transformer", "size": "base", "max_epochs": 9},
    })
    assert plan.cell("iwslt14-de-en", "base-again", "x").run == "base-again"
    assert plan.sharing("iwslt14-de-en", "base") == ["base", "base-beam2"]
    assert plan.cell("iwslt14-de-en", "base-beam2", "x").tag == "beam3-lp0p6-fairseq-best"
    assert plan.experiments["base-beam2"]["size"] == "base"
    assert plan.cell("iwslt14-de-en", "base-long", "x").run == "base-long"
    with pytest.raises(InputError, match=r"'experiments\.brand-new\.method' is missing"):
        plan_for(catalogue, experiments={"brand-new": {"size": "base"}})


def test_decode_override_of_a_dataset_changes_decoding_not_training(catalogue):
    datasets = make_config()["datasets"]
    datasets["toy"]["overrides"]["transformer"]["decode"] = {"beam": 3}
    plan = plan_for(catalogue, datasets=datasets)
    settings = plan.train_settings("toy", "base-beam2")
    assert "decode" not in settings and settings["size"] == "tiny"
    # the run keeps the name of the experiment that asks for tiny itself
    assert plan.cell("wmt14-en-de", "base", "x").run == "tiny"
    # dataset decode overrides beat the experiment's own (beam), the rest stays (lenpen)
    assert plan.decode_settings("toy", "base-beam2").beam == 3
    assert plan.decode_settings("toy", "base-beam2").lenpen == 0.6
    assert plan.cell("wmt14-en-de", "big", "x").tag == "beam3-lp1-fairseq-best"
    assert plan.cell("iwslt14-de-en", "big", "x").tag == T5  # other datasets unchanged


# --- status --------------------------------------------------------------------------------

def test_status_and_cells_that_need_no_files(catalogue):
    plan = plan_for(catalogue)
    assert plan.status("base") == "ok"
    assert plan.status("nat") == NOT_IMPLEMENTED  # future-method has no module
    assert plan.status("quoted") == EXTERNAL
    assert plan.status("bt") == NOT_IMPLEMENTED  # back-translation data is not built
    for experiment in ("nat", "quoted", "bt"):
        cell = plan.cell("iwslt14-de-en", experiment, "x")
        assert (cell.run, cell.tag) == (None, None)
    dirs = run_dirs(plan.targets())
    assert dirs == {"iwslt14-de-en/base", "iwslt14-de-en/half-data", "toy/tiny"}
    # the same plan with future-method implemented trains it
    plan = plan_for(catalogue, implemented={"transformer", "future-method"})
    assert plan.status("nat") == "ok"
    assert "iwslt14-de-en/nat" in run_dirs(plan.targets())
    assert plan.status("bt") == NOT_IMPLEMENTED and plan.status("quoted") == EXTERNAL


def test_status_on_a_dataset_follows_its_overrides_and_its_back_translations(catalogue):
    """A dataset's overrides can supply what the paper's setting asks for (the toy world's
    GPT-2 for deep fusion's GPT), and a dataset made with a published back-translated corpus
    gives `published_back_translations: true` its data; elsewhere both stay not implemented."""
    datasets = make_config()["datasets"]
    datasets["toy"]["overrides"]["bt"] = {"published_back_translations": False}
    datasets["ro-en-bt"] = {**datasets["iwslt14-de-en"], "kind": "wmt16", "src_lang": "ro",
                            "published_back_translations": True}
    plan = plan_for(catalogue, datasets=datasets)
    assert plan.status("bt") == NOT_IMPLEMENTED
    assert plan.status("bt", "iwslt14-de-en") == NOT_IMPLEMENTED
    assert plan.status("bt", "toy") == "ok" and plan.cell("wmt14-en-de", "bt", "x").run
    assert plan.status("bt", "ro-en-bt") == "ok"
    assert plan.status("quoted", "toy") == EXTERNAL


def test_a_row_trained_on_a_dataset_of_its_own_in_some_columns(catalogue):
    from nmtbench.workflow.papers import Column, Row

    row = Row("bt", "BT", {}, trained_on={"ro": "wmt16-ro-en-bt"})
    ro = Column("ro", "Ro-En", "wmt16-ro-en", "test", "bleu_tokenized")
    de = Column("de", "En-De", "wmt14-en-de", "test", "bleu_tokenized")
    assert row.dataset(ro) == "wmt16-ro-en-bt" and row.dataset(de) == "wmt14-en-de"


# --- targets -------------------------------------------------------------------------------

def test_table_targets_metrics_latency_and_bootstrap(catalogue):
    plan = plan_for(catalogue, tables=["mini.table1"])
    r = f"{IW}/base/seed1"
    h = f"{IW}/half-data/seed1"
    assert set(plan.targets()) == {
        # base (the baseline) and base-again: one run, one decoding
        f"{r}/metrics.test.{T5}.json", f"{r}/metrics.valid.{T5}.json",
        f"{r}/latency.{T5}.json",
        # base-beam2: the same run decoded with beam 2, compared with the baseline (latency
        # and speedup: both decodings timed in one job)
        f"{r}/metrics.test.{T2}.json", f"{r}/metrics.valid.{T2}.json",
        f"{r}/latency.{T2}.vs.base.{T5}.json",
        f"{r}/bootstrap.test.{T2}.bleu.vs.base.{T5}.json",
        f"{r}/bootstrap.test.{T2}.sacrebleu.vs.base.{T5}.json",  # its sacreBLEU column's
        # half-data: its own run
        f"{h}/metrics.test.{T5}.json", f"{h}/metrics.valid.{T5}.json",
        f"{h}/latency.{T5}.vs.base.{T5}.json",
        f"{h}/bootstrap.test.{T5}.bleu.vs.base.{T5}.json",
        f"{h}/bootstrap.test.{T5}.sacrebleu.vs.base.{T5}.json",
        # the claim that half-data beats base-beam2: their own paired bootstrap
        f"{h}/bootstrap.test.{T5}.bleu.vs.base.{T2}.json",
        f"{h}/bootstrap.test.{T5}.sacrebleu.vs.base.{T2}.json",
        # no bootstrap.valid: only the params column reads the valid split, and a parameter
        # count has no significance test
    }
    table = catalogue.tables["mini.table1"]
    assert plan.baseline_cell(table, 0) == plan.cell("iwslt14-de-en", "base", "x")
    targets = plan_for(catalogue, tables=["mini.table1"], seeds=[1, 2]).targets()
    assert len(targets) == 30
    assert f"{h}/latency.{T5}.vs.base.{T5}.json".replace("seed1", "seed2") in targets
    assert targets == sorted(targets)


def test_no_bootstrap_against_a_baseline_that_is_not_implemented(catalogue):
    plan = plan_for(catalogue, tables=["mini.table3"])
    assert plan.targets() == [f"{IW}/half-data/seed1/metrics.test.{T5}.json"]
    assert plan.baseline_cell(catalogue.tables["mini.table3"], 0) is None


def test_speedup_is_measured_against_the_baseline_in_one_job(catalogue):
    plan = plan_for(catalogue, tables=["mini.table4"])
    assert plan.targets() == [f"{IW}/base/seed1/latency.{T5}.json",
                              f"{IW}/half-data/seed1/latency.{T5}.vs.base.{T5}.json"]


def test_a_row_trained_on_other_data_is_tested_there_without_a_significance_test(catalogue):
    plan = plan_for(catalogue, tables=["mini.table5"])
    table = catalogue.tables["mini.table5"]
    cells = [cell for _, _, cell in plan.table_cells(table)]
    assert [c.dataset for c in cells] == ["iwslt14-de-en", "iwslt14-de-en", "toy"]
    assert cells[2] == plan.cell("wmt14-en-de", "big", "x")
    # half-data is tested against the baseline; big's test set is another dataset's
    assert set(plan.targets()) == {
        f"{IW}/base/seed1/metrics.test.{T5}.json",
        f"{IW}/half-data/seed1/metrics.test.{T5}.json",
        f"{IW}/half-data/seed1/bootstrap.test.{T5}.bleu.vs.base.{T5}.json",
        f"results/runs/toy/tiny/seed1/metrics.test.{T5}.json"}


def test_one_table_trains_nothing_else(catalogue):
    # big on wmt14-en-de -> the toy world, where it is the tiny model
    plan = plan_for(catalogue, tables=["mini.table2"])
    assert plan.targets() == [f"results/runs/toy/tiny/seed1/metrics.test.{T5}.json"]
    # the table's validation curves, drawn from the training logs of the runs it reads
    assert plan.figure_outputs() == ["results/figures/mini.table2.curves.png",
                                     "results/figures/mini.table2.curves.pdf"]


def test_figure_targets_by_kind(catalogue):
    sweep = plan_for(catalogue, tables=["mini.figure1"])
    assert set(sweep.targets()) == {
        f"{IW}/{run}/seed1/{name}.{T5}.json"
        for run in ("half-data", "base") for name in ("metrics.test", "latency")}
    assert sweep.figure_outputs() == ["results/figures/mini.figure1.png",
                                      "results/figures/mini.figure1.pdf"]  # and no table's
    both = plan_for(catalogue, tables=["mini.table2", "mini.figure1"])
    assert both.figure_outputs() == [f"results/figures/{name}.{ext}" for name in (
        "mini.figure1", "mini.table2.curves") for ext in ("png", "pdf")]
    curve = plan_for(catalogue, tables=["mini.figure2"])  # nat is not implemented
    assert curve.targets() == [f"{IW}/base/seed1/train_summary.json"]
    buckets = plan_for(catalogue, tables=["mini.figure3"])
    assert buckets.targets() == [f"{IW}/base/seed1/buckets.valid.{T2}.10-20.json",
                                 f"{IW}/base/seed1/buckets.valid.{T5}.10-20.json"]


# --- what was asked ------------------------------------------------------------------------

def test_unknown_requested_table_lists_the_known_ones(catalogue):
    plan = plan_for(catalogue, tables=["mini.table1", "mini.table9"])
    with pytest.raises(InputError) as err:
        plan.targets()
    assert str(err.value) == (
        "config key 'tables': unknown table or figure 'mini.table9'; known: mini.table1, "
        "mini.table2, mini.table3, mini.table4, mini.table5, mini.figure1, mini.figure2, "
        "mini.figure3")


def test_all_requests_everything_and_names_are_deduplicated(catalogue):
    plan = plan_for(catalogue, tables=["all"])
    assert plan.names == catalogue.names()
    assert [t.name for t in plan.tables] == ["mini.table1", "mini.table2", "mini.table3",
                                             "mini.table4", "mini.table5"]
    assert [f.name for f in plan.figures] == ["mini.figure1", "mini.figure2", "mini.figure3"]
    every = set()
    for name in catalogue.names():
        every |= set(plan_for(catalogue, tables=[name]).targets())
    assert set(plan.targets()) == every
    plan = plan_for(catalogue, tables=["mini.figure2", "mini.table2", "mini.figure2"])
    assert plan.names == ["mini.figure2", "mini.table2"]
    assert [t.name for t in plan.tables] == ["mini.table2"]


# --- the real default config -----------------------------------------------------------------

def test_default_config_plans_exactly_these_runs():
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    plan = nmtconfig.check(cfg, ROOT / "config" / "schema.yaml")
    assert run_dirs(plan.targets()) == {
        # every paper's base Transformer: the toy world's `sizes` turn base and iwslt into
        # tiny. Its cells: abnet2020.table1
        # transformer-base, deepfusion2022.table1 transformer-base, bertfused2020.table1
        # transformer-iwslt, ctnmt2020.table1 ctnmt-transformer-base (not bertkd2020's: it
        # reads the vocabulary of the BERT-KD teacher). It is named
        # transformer-tiny: the experiment of that name asks for tiny itself.
        "toy/transformer-tiny",
        # the larger baselines keep their order of size in miniature (deepfusion2022.table1 +
        # figure3): big (also bertfused2020.table5's back-translation Transformer) and the
        # deep encoders of Transformer-12 and -20
        "toy/transformer-big",
        "toy/deepfusion-transformer-12",
        "toy/deepfusion-transformer-20",
        # abnet2020.table1's Mask-Predict row, trained like deepfusion's CMLM (whose name has
        # fewer settings of its own)
        "toy/deepfusion-cmlm",
        # abnet2020.table1's AB-Net (also figure2's d_Aenc = 512 point) and AB-Net-Enc
        "toy/abnet",
        "toy/abnet-enc-nat",
        # abnet2020.figure2's other encoder adapter sizes
        "toy/abnet-daenc-64",
        "toy/abnet-daenc-128",
        "toy/abnet-daenc-256",
        "toy/abnet-daenc-1024",
        # the toy BERT fine-tuned as the encoder: bertfused2020.table1's "BERT initialises
        # the encoder" (the toy override replaces size iwslt and bert-base-uncased by tiny
        # and toy-bert-src)
        "toy/bert-init",
        # bertfused2020.table1's frozen BERT output as the NMT encoder's input embeddings
        "toy/bertfused-bert-embeddings",
        # abnet2020.table1's BERT-fused NAT, warm-started from the Mask-Predict run
        "toy/abnet-bert-fused-nat",
        # bertfused2020.table5's BERT-fused (AT, big), warm-started from the big Transformer run
        # (on the toy world, table5's "+ back translation" Transformer is that run)
        "toy/bertfused-roen-bt",
        # ctnmt2020.table1's three strategies alone and together
        "toy/ctnmt-rate-scheduling",
        "toy/ctnmt-dynamic-switch",
        "toy/ctnmt-distill",
        "toy/ctnmt-all",
        # deepfusion2022.table1 + figure3's proposed model (M = 2): on the toy world's 3-layer
        # BERT, one layer per group, like M = 1, whose name sorts first
        "toy/deepfusion-m1",
        # bertkd2020.table1 + figure2a: the baseline in the teacher's (joint) vocabulary,
        # the student, and its C-MLM teacher (the report's accuracy of its soft targets)
        "toy/bertkd-transformer-base",
        "toy/bertkd-kd-deen",
        "toy/bertkd-teacher-mbert",
        # nothing else: the papers' quoted rows are external
    }
    assert plan.sharing("toy", "deepfusion-m1") == [
        "deepfusion-m1", "deepfusion-m2", "deepfusion-mono-bert"]
    assert plan.sharing("toy", "bert-init") == [
        "bert-init", "bertfused-bert-init-encoder", "multi30k-bert-init"]
    assert [plan.train_settings("toy", run)["size"] for run in (
        "transformer-tiny", "deepfusion-transformer-12", "deepfusion-transformer-20",
        "transformer-big", "bertfused-roen-bt")] == [
        "tiny", "tiny-deep12", "tiny-deep20", "tiny-big", "tiny-big"]
    assert plan.checkpoints("toy", "bert-init") == {"src_bert": "toy-bert-src"}
    assert plan.checkpoints("toy", "transformer-tiny") == {}
    assert plan.checkpoints("toy", "abnet") == {"src_bert": "toy-bert-src",
                                                 "tgt_bert": "toy-bert-tgt"}
    assert plan.checkpoints("toy", "abnet-enc-nat") == {"src_bert": "toy-bert-src"}
    # only the checkpoints some run loads are pre-trained (no run loads the toy GPT-2 yet)
    # (the BERT-KD student's teacher, a run input, loads the joint one)
    assert plan.checkpoints("toy", "bertkd-teacher-mbert") == {"bert": "toy-bert-joint"}
    assert plan.pretrained_targets() == ["toy-bert-joint", "toy-bert-src", "toy-bert-tgt"]
    # only the runs a curve figure draws (deepfusion2022.figure3) log valid BLEU
    assert [plan.run_settings("toy", run, 1)["valid_bleu"] for run in (
        "deepfusion-transformer-12", "deepfusion-transformer-20", "transformer-tiny",
        "bert-init")] == [True, True, False, False]
    # and where the config asks for it everywhere, a teacher (never decoded) does not
    cfg["defaults"]["valid_bleu"] = True
    everywhere = nmtconfig.check(cfg, ROOT / "config" / "schema.yaml")
    assert everywhere.run_settings("toy", "bert-init", 1)["valid_bleu"]
    assert not everywhere.run_settings("toy", "bertkd-teacher-mbert", 1)["valid_bleu"]
    assert plan.sharing("toy", "transformer-tiny") == [
        "ctnmt-transformer-base", "deepfusion-transformer-base", "multi30k-transformer",
        "multi30k-transformer-greedy", "transformer-base", "transformer-iwslt",
        "transformer-tiny"]
    assert plan.sharing("toy", "bertkd-transformer-base") == [
        "bertkd-transformer-base", "bertkd-transformer-base-deen"]
    assert plan.sharing("toy", "transformer-big") == [
        "bertfused-transformer-big-bt", "deepfusion-transformer-big", "transformer-big"]
    run = "results/runs/toy/transformer-tiny/seed1"
    targets = set(plan.targets())
    kd = "results/runs/toy/bertkd-transformer-base/seed1"
    # one model, two decodings: beam 5 (the default), deepfusion's beam 4; bertkd's beam 4
    # with GNMT length penalty 0.6 (test for table1, valid for its dev column and figure2a)
    # decodes its own baseline
    assert {f"{run}/metrics.test.beam5-lp1-fairseq-best.json",
            f"{run}/metrics.test.beam4-lp1-fairseq-best.json",
            f"{kd}/metrics.test.beam4-lp0p6-gnmt-best.json",
            f"{kd}/metrics.valid.beam4-lp0p6-gnmt-best.json",
            f"{run}/latency.beam5-lp1-fairseq-best.json",  # abnet2020.table1 latency
            # deepfusion2022.figure3's curves
            "results/runs/toy/deepfusion-transformer-12/seed1/train_summary.json",
            "results/runs/toy/deepfusion-transformer-20/seed1/train_summary.json",
            f"{kd}/buckets.valid.beam4-lp0p6-gnmt-best.8-16-24-32-40.json",  # figure2a
            # abnet2020.table1: AB-Net's speedup, timed with the Transformer in one job (its
            # best checkpoint: the toy world overrides the paper's average of the last 10;
            # candidates ranked as the authors rank them, GNMT length penalty 1.1)
            "results/runs/toy/abnet/seed1/latency.lb4-it10-lp1p1-gnmt-best.vs.transformer-tiny."
            "beam5-lp1-fairseq-best.json",
            } <= targets



# --- checkpoint roles ----------------------------------------------------------------------

def default_plan(**experiments):
    """The real default config with `experiments` added, checked."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["experiments"] = experiments
    return nmtconfig.check(cfg, ROOT / "config" / "schema.yaml")


def test_a_bert_role_nothing_names_is_the_bert_pre_trained_on_its_side():
    """A new method's experiment needs no override on the toy world: a role that neither the
    experiment nor the dataset's overrides name is the toy BERT of its side, and only the
    methods that load a BERT read its vocabulary."""
    plan = default_plan(ours={"method": "abnet"},
                        ours_enc={"method": "abnet", "tgt_bert": None},
                        ours_ctnmt={"method": "ctnmt", "distill_side": "decoder"})
    assert plan.checkpoints("toy", "ours") == {"src_bert": "toy-bert-src",
                                               "tgt_bert": "toy-bert-tgt"}
    assert plan.vocabulary("toy", "ours", "tgt") == ("toy-bert-tgt", "tgt")
    assert plan.checkpoints("toy", "ours_enc") == {"src_bert": "toy-bert-src"}  # null: none
    assert plan.checkpoints("toy", "ours_ctnmt") == {"src_bert": "toy-bert-src",  # overrides
                                                     "tgt_bert": "toy-bert-tgt"}  # filled
    assert plan.checkpoints("toy", "transformer-tiny") == {}
    assert plan.vocabulary("toy", "transformer-tiny", "src") == (None, "src")
    # the joint BERT fills a joint role; a reversed dataset's sides are its original's, swapped
    assert plan.side_checkpoint("toy", "joint") == "toy-bert-joint"
    assert plan.checkpoints("toy-reverse", "ours_enc") == {"src_bert": "toy-bert-tgt"}
    # Multi30k's German and English BERTs, pre-trained on its source and target sides
    assert plan.checkpoints("multi30k-de-en", "ours") == {"src_bert": "m30k-bert-de",
                                                          "tgt_bert": "m30k-bert-en"}


def test_what_names_a_bert_wins_over_the_bert_pre_trained_on_its_side():
    """The experiment, then the dataset's overrides, win; the dataset's `checkpoints.<side>`
    is the default before any BERT pre-trained on that side."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["experiments"] = {"ours": {"method": "abnet", "src_bert": "bert-base-cased"}}
    cfg["datasets"]["toy"]["checkpoints"] = {"tgt": "bert-base-uncased"}
    cfg["datasets"]["toy"]["overrides"]["ours"] = {"src_bert": "toy-bert-joint"}
    plan = nmtconfig.check(cfg, ROOT / "config" / "schema.yaml")
    assert plan.checkpoints("toy", "ours") == {"src_bert": "toy-bert-joint",
                                               "tgt_bert": "bert-base-uncased"}
    del cfg["datasets"]["toy"]["overrides"]["ours"]
    plan = nmtconfig.check(cfg, ROOT / "config" / "schema.yaml")
    assert plan.checkpoints("toy", "ours")["src_bert"] == "bert-base-cased"


@pytest.mark.parametrize("pretraining, hint", [
    ({"toy-bert-tgt2": {"model": "bert", "dataset": "toy", "side": "tgt"}},
     "name one of the BERTs pre-trained on that side, toy-bert-tgt, toy-bert-tgt2"),
    ({"toy-bert-tgt": None},
     "pre-train one BERT on that side: a 'pretraining' entry of model bert, dataset toy, "
     "side tgt"),
])
def test_a_role_no_single_bert_fills_says_what_to_set(pretraining, hint):
    """Two BERTs on the side are no default; without one, the message says how to make one."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["experiments"] = {"ours": {"method": "abnet"}}
    cfg["pretraining"].update(pretraining)
    cfg["pretraining"] = {name: entry for name, entry in cfg["pretraining"].items() if entry}
    cfg["tables"] = ["ctnmt2020.table1"]  # one that reads no target-side BERT
    plan = nmtconfig.check(cfg, ROOT / "config" / "schema.yaml")
    assert "tgt_bert" not in plan.checkpoints("toy", "ours")
    with pytest.raises(InputError) as err:
        plan.run_cell("toy", "ours", "here")
    assert str(err.value) == (
        "here: experiment 'ours' on dataset 'toy' names no tgt_bert checkpoint (set it in the "
        f"experiment, or 'datasets.toy.checkpoints.tgt', or {hint})")

def test_planning_the_dag_leaves_torch_and_transformers_unloaded():
    """Snakemake plans the DAG in every process it starts (on a cluster: twice per job), so the
    modules the workflow imports load torch and transformers only where a model is built."""
    script = textwrap.dedent("""
        import sys
        from nmtbench.data import download, recipes
        from nmtbench import layout
        from nmtbench.workflow import config, plan, pretrained_names
        for extra in ([], ["config/paper.yaml"]):
            files = ["config/config.yaml", *extra]
            config.check(config.load_config(files), "config/schema.yaml", "papers")
        loaded = sorted(m for m in HEAVY if m in sys.modules)
        assert not loaded, loaded
    """).replace("HEAVY", repr(HEAVY))
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


HEAVY = ("torch", "transformers", "tokenizers")


@pytest.mark.parametrize("configfile", [[], ["--configfile", "config/paper.yaml"]],
                         ids=["default", "paper"])
def test_snakemake_dry_run_imports_neither_torch_nor_transformers(configfile):
    """The whole of `snakemake -n` (Snakefile, rules, every input function it calls), not
    only the config check: Python's import log names every module the process loaded."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "snakemake", "-n",
                             "--cores", "1", "--quiet", *configfile], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert "nmtbench.workflow.plan" in imported  # the log is there: the test can fail
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_features_from_loads_another_seeds_run_which_the_dag_trains_first():
    """BERT-fused Table 6's "encoder of another Transformer": the warm start is the seed's own
    Transformer run, the features come from the same recipe at seed + 1000."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["tables"] = ["bertfused2020.table6"]
    plan = nmtconfig.check(cfg, ROOT / "config" / "schema.yaml")
    cell = plan.cell("iwslt14-en-de", "bertfused-transformer-encoder-as-bert", "test")
    inputs = plan.run_inputs("toy", cell.run)
    assert inputs["init_from"].path("1") == (
        "results/runs/toy/transformer-tiny/seed1/checkpoints/best.pt")
    assert inputs["features_from"].path("1") == (
        "results/runs/toy/transformer-tiny/seed1001/checkpoints/best.pt")
    assert inputs["features_from"].needs("2") == (
        "results/runs/toy/transformer-tiny/seed1002/train_summary.json")


def test_gigaword_tables_read_their_own_splits_and_a_dataset_without_one_is_an_error():
    """Table 4 reads C-MLM's dev and test-dev samples (valid, test), Table 5 the official test
    set (test-official), which toy-sum makes as a third sample; a dataset that makes none is a
    config error naming the table and column."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["tables"] = ["bertkd2020.table4", "bertkd2020.table5"]
    targets = nmtconfig.check(cfg, ROOT / "config" / "schema.yaml").targets()
    student = "results/runs/toy-sum/bertkd-kd-gigaword/seed1/metrics.{}.beam4-lp0p6-gnmt-best.json"
    assert {student.format(split) for split in ("valid", "test", "test-official")} <= set(targets)
    cfg["dataset_map"]["gigaword"] = "toy"  # a toy world without test_official_pairs
    with pytest.raises(InputError) as err:
        nmtconfig.check(cfg, ROOT / "config" / "schema.yaml")
    assert str(err.value) == (
        "bertkd2020.table5 column 'r1': dataset 'toy' makes no split 'test-official' (a toy "
        "world makes it with world.test_official_pairs; a real dataset, where its recipe has it)")


def test_rouge_columns_are_marked_by_a_paired_bootstrap_of_their_own_rouge():
    """BERT-KD's Table 4 marks significance on ROUGE: each ROUGE column of each split gets the
    bootstrap of that ROUGE F1 against the baseline, and no BLEU bootstrap is made for it."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["tables"] = ["bertkd2020.table4"]
    targets = nmtconfig.check(cfg, ROOT / "config" / "schema.yaml").targets()
    run = "results/runs/toy-sum/bertkd-kd-gigaword/seed1"
    tag = "beam4-lp0p6-gnmt-best"
    assert {t for t in targets if "/bootstrap." in t} == {
        f"{run}/bootstrap.{split}.{tag}.{score}.vs.bertkd-transformer-base.{tag}.json"
        for split in ("valid", "test") for score in ("rouge1", "rouge2", "rougeL")}


def test_a_cycle_through_features_from_is_one_line():
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["experiments"] = {
        "loop-a": {"method": "bert-fused", "features_from": {"experiment": "loop-b"}},
        "loop-b": {"method": "bert-fused", "init_from": {"experiment": "loop-a"}}}
    with pytest.raises(InputError, match=r"runs learning from each other form a cycle "
                       r"\(loop-a -> loop-b -> loop-a\)"):
        nmtconfig.check(cfg, ROOT / "config" / "schema.yaml")


def test_a_cycle_through_sequence_distillation_is_one_line():
    """The distillation teacher starts from a student that trains on its translations: the
    config check says so, instead of Snakemake's cyclic graph when the DAG is built."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg["experiments"] = {
        "student": {"method": "cmlm"},
        "teacher": {"method": "transformer", "init_from": {"experiment": "student"}}}
    cfg["datasets"]["toy"]["sequence_distillation"] = "teacher"
    with pytest.raises(InputError) as err:
        nmtconfig.check(cfg, ROOT / "config" / "schema.yaml")
    assert str(err.value).endswith(
        ": runs learning from each other form a cycle (teacher -> student -> teacher)")

