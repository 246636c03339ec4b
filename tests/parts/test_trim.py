"""nmtbench/parts/trim.py: a checkpoint's vocabulary trimmed to the pieces a corpus uses."""

import json

import pytest
import torch
from tiny_checkpoints import save_tiny_bert

from nmtbench.data.tokenization import load_tokenizer
from nmtbench.errors import InputError
from nmtbench.parts.pretrained import load_model
from nmtbench.parts.trim import SUMMARY, kept_ids, trim_checkpoint


@pytest.fixture
def trimmed(tmp_path):
    save_tiny_bert(tmp_path / "bert", seed=3)
    (tmp_path / "a.txt").write_text("w5 w6 w7 w5\nw5 w8\n")
    (tmp_path / "b.txt").write_text("w9 w5 w6\nw10\n")
    summary = trim_checkpoint(tmp_path / "bert", [tmp_path / "a.txt", tmp_path / "b.txt"], 9,
                              tmp_path / "trimmed")
    return tmp_path, summary


def test_keeps_the_special_tokens_and_the_most_frequent_pieces_in_order(trimmed):
    tmp_path, summary = trimmed
    tok = load_tokenizer(tmp_path / "trimmed")
    # counts: w5 4, w6 2, w7 w8 w9 w10 1 each; 5 specials + 4 pieces: w5, w6 and (ties, lower
    # id first) w7, w8
    assert tok.convert_ids_to_tokens(list(range(len(tok)))) == [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "w5", "w6", "w7", "w8"]
    assert summary["size"] == 9 and summary["original_size"] == 100
    # the corpora are read twice, as a source and as a target reads them
    assert summary["corpus_pieces"] == 20 and summary["pieces_used"] == 6
    assert summary["corpus_coverage"] == pytest.approx(8 / 10)
    assert json.loads((tmp_path / "trimmed" / SUMMARY).read_text()) == summary
    assert tok.tokenize("w5 w9") == ["w5", "[UNK]"]  # a dropped piece


def test_the_kept_pieces_keep_their_embeddings_and_predictions(trimmed):
    tmp_path, _ = trimmed
    full = load_model(tmp_path / "bert", masked_lm=True).eval()
    small = load_model(tmp_path / "trimmed", masked_lm=True).eval()
    assert small.config.vocab_size == 9
    old = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8])  # the tiny vocabulary's first ids are kept
    torch.testing.assert_close(small.get_input_embeddings().weight,
                               full.get_input_embeddings().weight[old])
    ids_old = torch.tensor([[2, 5, 6, 4, 3]])  # [CLS] w5 w6 [MASK] [SEP]
    with torch.no_grad():
        before = full(ids_old).logits[..., old]
        after = small(ids_old).logits  # the same ids in the trimmed vocabulary
    torch.testing.assert_close(after, before)
    assert small.get_output_embeddings().weight is small.get_input_embeddings().weight


def test_a_size_without_room_beside_the_special_tokens_is_refused():
    with pytest.raises(InputError, match="leaves no room"):
        kept_ids({7: 3}, specials=[0, 1, 2], size=3)


def test_the_cli_trims_and_refuses_a_size_without_room_in_one_line(tmp_path, capsys):
    from nmtbench.cli import main

    save_tiny_bert(tmp_path / "bert", seed=1)
    (tmp_path / "c.txt").write_text("w5 w6\n")
    run = ["trim", "--checkpoint", str(tmp_path / "bert"), "--corpus", str(tmp_path / "c.txt"),
           "--out", str(tmp_path / "out"), "--size"]
    assert main([*run, "7"]) == 0
    assert len(load_tokenizer(tmp_path / "out")) == 7
    capsys.readouterr()
    assert main([*run, "5"]) == 2
    assert capsys.readouterr().err == (
        "error: trimmed vocabulary size 5 leaves no room beside the 5 special tokens\n")


def test_a_tokenizer_config_naming_the_full_vocabularys_file_is_not_followed(tmp_path):
    save_tiny_bert(tmp_path / "bert", seed=1)
    config = tmp_path / "bert" / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()),
                                  "tokenizer_file": str(tmp_path / "gone" / "tokenizer.json")}))
    (tmp_path / "c.txt").write_text("w5 w6\n")
    trim_checkpoint(tmp_path / "bert", [tmp_path / "c.txt"], 7, tmp_path / "out")
    assert "tokenizer_file" not in json.loads((tmp_path / "out" / "tokenizer_config.json")
                                              .read_text())
    assert len(load_tokenizer(tmp_path / "out")) == 7


def test_an_empty_corpus_is_refused_and_nothing_written(tmp_path):
    save_tiny_bert(tmp_path / "bert", seed=3)
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(InputError, match=r"empty.txt: no text to count pieces in"):
        trim_checkpoint(tmp_path / "bert", [tmp_path / "empty.txt"], 9, tmp_path / "trimmed")
    assert not (tmp_path / "trimmed").exists()


def test_a_checkpoint_without_tokenizer_config_trims_with_its_normaliser(tmp_path):
    """tokenizer.json alone says how text is read: the trimmed vocabulary reads it the same
    way (an error once named the trim's temporary directory)."""
    save_tiny_bert(tmp_path / "bert", seed=3)
    (tmp_path / "bert" / "tokenizer_config.json").unlink()
    (tmp_path / "a.txt").write_text("w5 w6 w7 w5\nW5 w8\n")
    trim_checkpoint(tmp_path / "bert", [tmp_path / "a.txt"], 9, tmp_path / "trimmed")
    original, trimmed = load_tokenizer(tmp_path / "bert"), load_tokenizer(tmp_path / "trimmed")
    assert trimmed.tokenize("W5 w6 w8") == original.tokenize("W5 w6 w8") == ["w5", "w6", "w8"]
