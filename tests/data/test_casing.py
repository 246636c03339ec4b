"""Casing per side (nmtbench/data/casing.py): which checkpoints read case, which sides a
recipe's preparation lowercases, and the one-line refusal of a cased checkpoint on a
lowercased side."""

from pathlib import Path

import pytest

from nmtbench.data.casing import lowercased_sides, reads_case
from nmtbench.errors import InputError
from nmtbench.workflow.config import check, load_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name, cased", [
    ("bert-base-uncased", False), ("bert-large-uncased", False),
    ("bert-base-german-cased", True), ("bert-base-multilingual-cased", True),
    ("dbmdz/bert-base-german-cased", True), ("gpt2", True), ("toy-bert-src", None), (None, None),
])
def test_the_name_of_a_hub_checkpoint_says_whether_it_reads_case(name, cased):
    assert reads_case(name) is cased


def test_a_local_checkpoint_is_read_by_its_tokenizer_config_and_a_trimmed_one_by_its_source(
        tmp_path):
    local = tmp_path / "my-cased-looking-name"
    local.mkdir()
    (local / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    assert reads_case(str(local)) is False
    trimmed = {"mbert-small": {"checkpoint": "bert-base-multilingual-cased"}}
    assert reads_case("mbert-small", trimmed) is True


def test_a_recipe_lowercases_only_the_sides_no_cased_checkpoint_reads():
    iwslt = {"kind": "iwslt14", "src_lang": "de", "tgt_lang": "en"}
    assert lowercased_sides(iwslt, recipe_lowercases=True) == {"src", "tgt"}
    german_cased = {**iwslt, "checkpoints": {"src": "bert-base-german-cased",
                                             "tgt": "bert-base-uncased"}}
    assert lowercased_sides(german_cased, recipe_lowercases=True) == {"tgt"}
    assert lowercased_sides({**german_cased, "keep_case": ["tgt"]}, True) == set()
    assert lowercased_sides({**iwslt, "checkpoints": {"joint": "gpt2"}}, True) == set()
    assert lowercased_sides(german_cased, recipe_lowercases=False) == set()


def test_a_cased_checkpoint_on_a_lowercased_side_is_refused_at_planning_in_one_line():
    """C-MLM's mBERT teacher reads IWSLT14 De-En's English: without keep_case the plan stops."""
    config = load_config([ROOT / "config" / "config.yaml", ROOT / "config" / "paper.yaml"])
    check(config, ROOT / "config" / "schema.yaml", ROOT / "papers")  # as configured: plans
    config = load_config([ROOT / "config" / "config.yaml", ROOT / "config" / "paper.yaml"])
    del config["datasets"]["iwslt14-de-en"]["keep_case"]
    with pytest.raises(InputError) as err:
        check(config, ROOT / "config" / "schema.yaml", ROOT / "papers")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("run iwslt14-de-en/bertkd-teacher-mbert, bert: "
                              "'bert-base-multilingual-cased' reads cased text")
    assert "add tgt to datasets.iwslt14-de-en.keep_case" in message
