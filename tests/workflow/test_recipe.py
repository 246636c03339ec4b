"""Paper runs train as their papers did, or config/paper.yaml says why not: each run's
effective recipe (nmtbench/workflow/recipes.py) against the papers' `recipes`."""

import shutil
from pathlib import Path

import pytest
import yaml

from nmtbench import cli
from nmtbench.errors import InputError
from nmtbench.workflow.config import check, load_config
from nmtbench.workflow.papers import PAPERS_DIR, load_catalogue
from nmtbench.workflow.recipes import run_recipes, unexplained

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "config" / "schema.yaml"
CONFIGS = [ROOT / "config" / "config.yaml", ROOT / "config" / "paper.yaml"]


def _plan(*extra: Path):
    return check(load_config([*CONFIGS, *extra]), SCHEMA, PAPERS_DIR)


def _copy_with(tmp_path: Path, change: dict) -> Path:
    """A config merged over config/paper.yaml, as a copy with one change would be."""
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(change))
    return path


@pytest.fixture(scope="module")
def paper_plan():
    return _plan()


def test_every_difference_from_a_paper_in_paper_yaml_has_a_reason(paper_plan):
    assert unexplained(paper_plan, run_recipes(paper_plan)) == []


def test_the_recipes_are_derived_from_the_config(paper_plan):
    runs = {(r.experiment, r.paper_dataset): r for r in run_recipes(paper_plan)}
    abnet = runs[("abnet", "iwslt14-de-en")]
    assert abnet.theirs.facts["tokens_per_update"]["value"] == 4000  # 2,000 x 2 (README)
    assert abnet.ours["tokens_per_update"] == 4096 and "tokens_per_update" in abnet.differs
    # the same 10 averaged as the authors', of update checkpoints where theirs were of epochs
    assert abnet.theirs.facts["average_last"]["form"] == "epochs"
    assert abnet.ours["average_last"] == (10, "updates") and "average_last" in abnet.differs
    student = runs[("bertkd-kd-deen", "iwslt14-de-en")]
    assert student.ours["tokens_per_update"] == 6000 and student.differs == []
    assert student.ours["stopping"] == "updates" and student.ours["updates"] == 100000
    teacher = runs[("bertkd-teacher-mbert", "wmt14-en-de")]
    assert teacher.ours["beam"] is None  # never decoded
    assert teacher.ours["tokens_per_update"] == 512000 and teacher.differs == []


def test_the_paper_runs_stop_as_their_papers_do(paper_plan):
    """No patience but CTNMT's (its public code's early stop), its baseline's with it; deep
    fusion's CTNMT rows train as deep fusion's other rows."""
    runs = run_recipes(paper_plan)
    patient = {r.experiment for r in runs if r.ours["stopping"].startswith("patience")}
    assert patient and all(e.startswith("ctnmt-") for e in patient)
    assert "ctnmt-transformer-base" in patient


def test_changing_a_recipe_key_in_a_copy_of_the_config_fails(tmp_path):
    # a student's batch: 6k tokens in Appendix A, and no deviation states another
    changed = _plan(_copy_with(tmp_path, {"experiments": {"bertkd-kd-deen": {"max_tokens": 4096}}}))
    left = unexplained(changed, run_recipes(changed))
    assert left == ["bertkd-kd-deen on iwslt14-de-en: tokens_per_update is 4096, bertkd2020 "
                    "gives 6000 (config key 'recipe_deviations.bertkd-kd-deen.tokens_per_update' "
                    "states no reason)"]


def test_gpus_of_the_train_rule_multiply_the_batch(tmp_path):
    resources = load_config(CONFIGS)["resources"]
    resources["train"]["gpu"] = 2
    changed = _plan(_copy_with(tmp_path, {"resources": resources}))
    runs = {(r.experiment, r.paper_dataset): r for r in run_recipes(changed)}
    assert runs[("bertkd-kd-deen", "iwslt14-de-en")].ours["tokens_per_update"] == 12000
    assert any(line.startswith("bertkd-kd-deen on iwslt14-de-en: tokens_per_update is 12000")
               for line in unexplained(changed, run_recipes(changed)))


def test_a_deviation_where_nothing_differs_is_stale(tmp_path):
    applied = {"recipe_deviations": {"bertfused-iwslt": {"updates": "150,000 is too long"}}}
    changed = _plan(_copy_with(tmp_path, applied))
    assert unexplained(changed, run_recipes(changed)) == [
        "config key 'recipe_deviations.bertfused-iwslt.updates': bertfused-iwslt follows its "
        "paper's updates wherever it runs (or has no recipe for it); drop the deviation"]


def test_a_key_given_twice_for_a_run_is_one_line(tmp_path):
    papers = tmp_path / "papers"
    shutil.copytree(PAPERS_DIR, papers)
    path = papers / "bertkd2020.yaml"
    data = yaml.safe_load(path.read_text())
    data["recipes"].append({"experiments": ["bertkd-kd-deen"], "datasets": ["iwslt14-de-en"],
                            "lr": {"value": 1.0e-3, "source": "nowhere"}})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(InputError, match=r"bertkd2020.yaml: key 'recipes.\d+': bertkd-kd-deen on "
                       "iwslt14-de-en is given lr twice"):
        load_catalogue(papers)


def test_the_command_prints_a_table_per_paper(capsys):
    assert cli.main(["recipe", "--root", str(ROOT), "--configfile",
                     str(ROOT / "config" / "paper.yaml")]) == 0
    out = capsys.readouterr().out
    for paper in ("abnet2020", "bertfused2020", "bertkd2020", "ctnmt2020", "deepfusion2022"):
        assert f"## {paper}" in out
    assert "| iwslt14-de-en | bertkd-kd-deen | 6000 ✓ |" in out
    assert "Unexplained" not in out and "no reason" not in out


@pytest.mark.parametrize("gpus, update_freq", [(0, 48), (1, 48), (4, 12), (8, 6), (7, 7)])
def test_tokens_per_update_are_kept_on_any_number_of_gpus(tmp_path, gpus, update_freq):
    """C-MLM's WMT baseline: 384,000 tokens per update in 8,000-token batches, accumulated
    over as many batches as the train rule's GPUs leave (at least the tokens asked: 7 GPUs x
    7 batches x 8,000); the recipe stays the paper's, so no deviation is needed."""
    plan = _plan(_copy_with(tmp_path, {"resources": {"train": {"gpu": gpus}}}))
    settings = plan.train_settings("wmt14-en-de", "bertkd-transformer-base")
    assert settings["update_freq"] == update_freq and "tokens_per_update" not in settings
    (run,) = [r for r in run_recipes(plan)
              if (r.experiment, r.dataset) == ("bertkd-transformer-base", "wmt14-en-de")]
    assert run.ours["tokens_per_update"] == 8000 * update_freq * max(gpus, 1)
    assert ("tokens_per_update" in run.differs) == (gpus == 7)


@pytest.mark.parametrize("value", [0, 2.5, True])
def test_a_tokens_per_update_that_is_no_count_is_refused(tmp_path, value):
    extra = _copy_with(tmp_path, {"experiments": {"bertkd-transformer-base": {
        "tokens_per_update": value}}})
    with pytest.raises(InputError, match=r"^config key 'experiments\.bertkd-transformer-base"
                                         r"\.tokens_per_update': \S+ is not a positive "
                                         "integer$"):
        _plan(extra)


@pytest.mark.parametrize("gpus, update_freq", [(0, 32), (1, 32), (4, 8), (8, 4), (3, 11)])
def test_sentences_per_update_are_kept_on_any_number_of_gpus(tmp_path, gpus, update_freq):
    """Deep fusion's En-De update: 64 sentences x 4 accumulated x 8 V100s = 2,048 sentences,
    accumulated over as many 64-sentence batches as the train rule's GPUs leave."""
    plan = _plan(_copy_with(tmp_path, {"resources": {"train": {"gpu": gpus}}}))
    settings = plan.train_settings("wmt14-en-de", "deepfusion-m2")
    assert settings["update_freq"] == update_freq and "sentences_per_update" not in settings
    (run,) = [r for r in run_recipes(plan)
              if (r.experiment, r.dataset) == ("deepfusion-m2", "wmt14-en-de")]
    assert run.ours["sentences_per_update"] == 64 * update_freq * max(gpus, 1)
    assert ("sentences_per_update" in run.differs) == (gpus == 3)


def test_sentences_per_update_without_a_sentence_batch_is_one_line(tmp_path):
    extra = _copy_with(tmp_path, {"experiments": {"deepfusion-m2": {"max_sentences": 0}}})
    with pytest.raises(InputError, match=r"^deepfusion-m2 on wmt14-en-de: sentences_per_update "
                                         r"2048 needs max_sentences above 0, the batch it "
                                         "accumulates$"):
        _plan(extra)


def test_an_update_sized_twice_is_one_line(tmp_path):
    extra = _copy_with(tmp_path, {"experiments": {"deepfusion-m2": {"tokens_per_update": 8192}}})
    with pytest.raises(InputError, match=r"^deepfusion-m2 on wmt14-en-de: tokens_per_update and "
                                         "sentences_per_update are both set"):
        _plan(extra)
