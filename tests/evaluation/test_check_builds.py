"""Settings checked before any job (issue 40, class 8): every run the DAG trains is built from
configs alone when the workflow starts (`check_builds`, snakemake's onstart and `python -m
nmtbench check`), so a setting no model can take is one line naming the run, not an error
minutes later when that run's job starts after the data, the pre-training and its parents."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from smoke import ROOT, SMOKE, smoke_plan

from nmtbench.cli import main
from nmtbench.errors import InputError
from nmtbench.evaluation.params import check_builds
from nmtbench.workflow.config import check, load_config


def with_override(tmp_path: Path, method: str, settings: dict) -> Path:
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump(
        {"datasets": {"toy": {"overrides": {method: settings}}}}))
    return extra


# method -> a setting it cannot be built with on the smoke config -> the one line's end
BAD = {
    "group size that does not divide the PTM's layers": (
        "deep-fusion", {"group_size": 3}, "deep-fusion group_size 3"),
    "rate schedule warming past its end": (
        "ctnmt", {"rate_warm_updates": 600}, "need 0 < rate_warm_updates < rate_freeze_updates"),
    "decoder frozen with nothing to start from": (
        "deep-fusion", {"freeze_decoder": True}, "freeze_decoder needs decoder_init"),
    "shared embeddings of unequal widths": (
        "deep-fusion", {"share_embeddings": True, "vocabulary": "toy-bert-src", "d_model": 64},
        "the PTM's width 128 is not the decoder's d_model 64"),
    "shared embeddings over two vocabularies": (
        "transformer", {"share_embeddings": True}, "share_embeddings needs one vocabulary"),
    "unknown size": ("transformer", {"size": "huge"}, "unknown transformer size 'huge'"),
    "heads that do not divide the width": (
        "bert-fused", {"d_model": 30, "n_heads": 4}, "d_model 30 is not a multiple of n_heads 4"),
    "top_k above the vocabulary": (
        "bert-kd", {"top_k": 100000}, "top_k 100000 exceeds the target vocabulary"),
    # decodings the model's sizes rule out: a beam wider than the target vocabulary, more
    # length candidates than the lengths a NAT model predicts (the search would cut them)
    "a beam wider than the target vocabulary": (
        "transformer", {"decode": {"beam": 100000}},
        "decode key 'beam' 100000 is wider than the target vocabulary"),
    "length candidates past the longest length": (
        "cmlm", {"decode": {"length_beam": 1000}},
        "decode key 'length_beam' 1000 is more than the 255 target lengths the model predicts"),
    "teacher deeper than its BERT (a run no table shows)": (
        "bert-kd-teacher", {"teacher_layers": 5}, "teacher_layers 5: the BERT has 1 layers"),
    "adapter after a layer the BERT lacks": (
        "abnet", {"encoder_adapter_layers": [7]}, "encoder_adapter_layers [7]"),
    "freezing below more layers than the BERT has": (
        "bert-init", {"freeze_bert": "below-top-5"}, "the model has only 1 layers"),
    # a checkpoint of another kind than the role loads: transformers' error, in one line
    "a GPT-2 where a masked-LM BERT is read": (
        "abnet", {"tgt_bert": "toy-gpt2-tgt"}, "a gpt2 model, which this role cannot take"),
    "a GPT-2 as a BERT encoder": (
        "bert-init", {"src_bert": "toy-gpt2-src"}, "a gpt2 model, which this role cannot take"),
    "decoder distillation without a target BERT": (
        "ctnmt", {"distillation": True, "distill_side": "decoder", "tgt_bert": None},
        "distill_side decoder needs `tgt_bert`"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_setting_no_model_takes_is_one_line_naming_the_run(case, tmp_path):
    method, settings, ending = BAD[case]
    plan = smoke_plan(with_override(tmp_path, method, settings))  # the planning check passes
    with pytest.raises(InputError) as err:
        check_builds(plan)
    message = str(err.value)
    assert message.startswith("run toy/") and ending in message and "\n" not in message


def test_the_smoke_and_default_configs_build_every_run_they_train(capsys):
    """`check` on the smoke config, in this process (its exit status and one line on a bad
    setting, from a process of its own, are the next test's): every run it trains builds."""
    plan = smoke_plan()
    assert main(["check", "--root", str(ROOT), "--configfile", str(SMOKE)]) == 0
    assert capsys.readouterr().out == (
        f"config ok: the models of {len(plan.trained_runs())} runs build\n")  # none left
    assert len(plan.trained_runs()) > len(plan.runs())  # teachers and parents no table shows


def test_check_command_and_a_workflow_start_stop_on_it_before_any_job(tmp_path):
    extra = with_override(tmp_path, "ctnmt", {"rate_warm_updates": 600})
    check = subprocess.run([sys.executable, "-m", "nmtbench", "check", "--root", str(ROOT),
                            "--configfile", str(SMOKE), str(extra)],
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 2 and check.stderr.strip().startswith("error: run toy/ctnmt-")
    assert check.stderr.count("\n") == 1 and not check.stdout  # (a good config: the test above)

    workdir = tmp_path / "work"
    run = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile",
                          str(ROOT / "Snakefile"), "--directory", str(workdir), "--cores", "2",
                          "--configfile", str(SMOKE), str(extra)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert "config error: run toy/ctnmt-" in run.stderr and "Traceback" not in run.stderr
    assert not (workdir / "data").exists() and not (workdir / "logs").exists()  # no job ran

    # it builds the runs the DAG trains: one that trains none starts (the bad setting stops
    # the invocation that trains its run)
    data = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile",
                           str(ROOT / "Snakefile"), "--directory", str(workdir), "--cores", "1",
                           "data/toy/prepared/train.src", "--configfile", str(SMOKE), str(extra)],
                          capture_output=True, text=True, timeout=300)
    assert data.returncode == 0, data.stderr[-2000:]
    assert "config error" not in data.stderr and (workdir / "data" / "toy").is_dir()


def test_only_the_runs_named_are_built(tmp_path):
    """What the workflow's start-up check passes: the runs its DAG trains."""
    plan = smoke_plan(with_override(tmp_path, "ctnmt", {"rate_warm_updates": 600}))
    assert check_builds(plan, {("toy", "transformer-tiny")}) == (1, [])
    assert check_builds(plan, set()) == (0, [])
    with pytest.raises(InputError, match="^run toy/ctnmt-"):
        check_builds(plan, {("toy", "transformer-tiny"), *plan.trained_runs()})


def test_a_snakemake_host_without_torch_skips_the_start_up_check_with_one_line(tmp_path):
    """With --use-conda the jobs bring torch; the host running snakemake may lack it."""
    fake = tmp_path / "no-torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no torch on this host')\n")
    workdir = tmp_path / "work"
    run = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile",
                          str(ROOT / "Snakefile"), "--directory", str(workdir), "--cores", "1",
                          "data/toy/prepared/train.src", "--configfile", str(SMOKE)],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(fake.parent)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert ("start-up check skipped (no torch on this host); each run checks its settings "
            "when its job starts") in run.stderr


# the parent of a warm start made to read another vocabulary (all of the default config's
# Transformers read the joint one): of another size, or of the same size but other pieces
OTHER_VOCABULARY = {
    "another size": ({}, "init_from toy/transformer-big: encoder.embed.weight has shape "
                         "(3000, 192), the model's is (2000, 192)"),
    "the same size": ({"vocab_size": {"src": 1000, "tgt": 1000, "joint": 1000}},
                      "init_from toy/transformer-big: the src side reads "
                      "data/toy/tokenizer/src's vocabulary, toy/transformer-big read "
                      "data/toy/tokenizer/joint's; warm-start from a run of the same vocabulary"),
}


def default_plan(*extra: Path):
    return check(load_config([ROOT / "config" / "config.yaml", *extra]),
                 ROOT / "config" / "schema.yaml", ROOT / "papers")


@pytest.mark.parametrize("case", sorted(OTHER_VOCABULARY))
def test_a_warm_start_from_a_parent_of_another_vocabulary_is_one_line(case, tmp_path):
    """Found before any job, not when the child starts after its parent trained for days
    (deep fusion's BERT-fused run on the paper config was one): one line naming both runs."""
    dataset, ending = OTHER_VOCABULARY[case]
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump({"datasets": {"toy": {
        **dataset, "overrides": {"transformer": {"vocabulary": "joint"}}}}}))
    with pytest.raises(InputError) as err:
        check_builds(default_plan(extra))
    message = str(err.value)
    assert message == f"run toy/bertfused-roen-bt, {ending}", message


def test_the_paper_config_warm_starts_every_run_from_a_parent_it_fits():
    """Every init_from and features_from of config/paper.yaml loads into its child."""
    plan = default_plan(ROOT / "config" / "paper.yaml")
    built, left = check_builds(plan)
    assert built == len(plan.trained_runs()) - len(left) and built > 100


def test_a_pretraining_no_model_can_have_is_one_line(tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump({"pretraining": {"toy-bert-src": {"d_model": 30,
                                                                      "n_heads": 4}}}))
    with pytest.raises(InputError) as err:
        check_builds(smoke_plan(extra))
    assert str(err.value).endswith("a bert of d_model 30 cannot have 4 attention heads: "
                                   "d_model must be a multiple of n_heads")
