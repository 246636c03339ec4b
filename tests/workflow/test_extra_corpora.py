"""A pre-training's extra corpora (`pretraining.<name>.extra_corpora`): planned as inputs of its
job, each side's text made by rule extra_corpus from its download, read for training only;
a corpus it cannot read refused at planning in one line naming the key."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nmtbench.errors import InputError
from nmtbench.workflow import config as nmtconfig

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SAMPLE = "iwslt14-train-sample"
# a German BERT and a joint one on Multi30k, both also reading the IWSLT14 sample
EXTRA = {
    "datasets": {"multi30k-de-en": {"vocab_size": {"joint": 12000}}},
    "pretraining": {
        "x-bert-de": {"model": "bert", "dataset": "multi30k-de-en", "side": "src",
                      "extra_corpora": [SAMPLE]},
        "x-bert-joint": {"model": "bert", "dataset": "multi30k-de-en", "side": "joint",
                         "extra_corpora": [SAMPLE]},
    },
}


def dry_run(tmp_path: Path, extra: dict, *targets: str) -> subprocess.CompletedProcess:
    config = tmp_path / "extra.yaml"
    config.write_text(yaml.safe_dump(extra))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *targets, "-n", "--cores", "1", "--snakefile",
         str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile",
         str(ROOT / "config" / "multi30k.yaml"), str(config)],
        capture_output=True, text=True, timeout=300)


def job(stdout: str, rule: str, wildcards: str) -> str:
    """The dry run's block of the job of `rule` with these wildcards."""
    [block] = [b for b in stdout.split("\n\n")
               if f"rule {rule}:" in b and f"wildcards: {wildcards}\n" in b + "\n"]
    return block


@pytest.mark.slow
def test_the_extra_corpus_is_an_input_of_the_pretraining_and_made_from_its_download(tmp_path):
    result = dry_run(tmp_path, EXTRA, "data/pretrained/x-bert-de/config.json",
                     "data/pretrained/x-bert-joint/config.json")
    assert result.returncode == 0, result.stderr[-3000:]
    text = "data/multi30k-de-en/extra_corpora/iwslt14-train-sample.{}"
    german = job(result.stdout, "pretrain", "pretrained=x-bert-de")
    assert (f"input: data/multi30k-de-en/prepared/train.src, {text.format('src')}, "
            "data/multi30k-de-en/tokenizer/src/tokenizer_config.json") in german
    assert "--corpus data/multi30k-de-en/prepared/train.src --tokenizer" in german
    assert f"--threads 1 --train-only {text.format('src')}>" in german
    joint = job(result.stdout, "pretrain", "pretrained=x-bert-joint")
    assert f"--train-only {text.format('src')} {text.format('tgt')}>" in joint
    download = "data/downloads/nmt-iwslt/iwslt14.tokenized.de-en/lr_samples/first/train.{}"
    for side, lang in (("src", "de"), ("tgt", "en")):
        made = job(result.stdout, "extra_corpus",
                   f"dataset=multi30k-de-en, corpus={SAMPLE}, side={side}")
        assert f"input: {download.format(lang)}\n" in made
        assert f"--corpus {SAMPLE} --side {side} " in made
    assert result.stdout.count("rule download_nmt_iwslt:") == 2


@pytest.mark.parametrize("mutate, message", [
    (lambda p: p["x-bert-de"].update(extra_corpora=["german-news"]),
     "config key 'pretraining.x-bert-de.extra_corpora': unknown monolingual corpus "
     "'german-news'; known: english-wikipedia, iwslt14-train-sample"),
    (lambda p: p["x-bert-de"].update(extra_corpora=["english-wikipedia"]),
     "config key 'pretraining.x-bert-de.extra_corpora': dataset 'multi30k-de-en': the "
     "monolingual corpus 'english-wikipedia' is 'en' text, but the source language is 'de'"),
    (lambda p: p["x-bert-de"].update(dataset="toy"),
     "config key 'pretraining.x-bert-de.extra_corpora': dataset 'toy' is a toy world, which "
     "pre-trains on its own monolingual corpus; remove the key"),
    (lambda p: p["x-bert-de"].update(extra_corpora=[SAMPLE, SAMPLE]),
     "config key 'pretraining.x-bert-de.extra_corpora': ['iwslt14-train-sample', "
     "'iwslt14-train-sample'] has non-unique elements"),
    (lambda p: p["x-bert-de"].update(extra_corpora=["../x"]),
     "config key 'pretraining.x-bert-de.extra_corpora.0': '../x' is not a name"),
])
def test_a_corpus_the_pretraining_cannot_read_is_refused_naming_the_key(mutate, message):
    config = copy.deepcopy(DEFAULT)
    config["pretraining"].update(copy.deepcopy(EXTRA["pretraining"]))
    mutate(config["pretraining"])
    with pytest.raises(InputError) as err:
        nmtconfig.check(config, ROOT / "config" / "schema.yaml")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.slow
def test_snakemake_stops_on_a_bad_extra_corpus_in_one_line(tmp_path):
    extra = copy.deepcopy(EXTRA)
    extra["pretraining"]["x-bert-de"]["extra_corpora"] = ["german-news"]
    result = dry_run(tmp_path, extra)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "config error: config key 'pretraining.x-bert-de.extra_corpora': unknown monolingual "
        "corpus 'german-news'; known: english-wikipedia, iwslt14-train-sample")
