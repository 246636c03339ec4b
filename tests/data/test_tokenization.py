"""Vocabularies (WordPiece; byte-level BPE, as GPT-2's) round-trip through the Hugging Face
save/load contract."""

from pathlib import Path

import pytest
from tiny_checkpoints import save_byte_level_gpt2
from transformers import AutoTokenizer

from nmtbench.data.tokenization import decode, load_tokenizer, train_wordpiece, vocab_of
from nmtbench.errors import InputError


def test_autotokenizer_loads_the_saved_vocabulary(toy_dir):
    tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_src"))
    vocab = vocab_of(tok)
    assert 100 < vocab.size <= 600
    assert len({vocab.pad, vocab.bos, vocab.eos, vocab.unk, vocab.mask}) == 5
    ids = tok("kalo ze .")["input_ids"]
    assert ids[0] == vocab.bos and ids[-1] == vocab.eos


def test_round_trip_restores_every_test_sentence(toy_dir):
    for side in ("src", "tgt"):
        tok = AutoTokenizer.from_pretrained(str(toy_dir / f"tok_{side}"))
        lines = (toy_dir / f"test.{side}").read_text().splitlines()
        for line in lines:
            assert decode(tok, tok(line)["input_ids"]) == line
        # words split into pieces really occur, so the round trip exercises "##" joining
        assert any("##" in piece for line in lines for piece in tok.tokenize(line))


def test_decode_keeps_space_before_punctuation(toy_dir):
    tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_tgt"))
    line = (toy_dir / "test.tgt").read_text().splitlines()[0]
    assert decode(tok, tok(line)["input_ids"]).endswith(" .")


def test_training_twice_gives_the_same_vocabulary(toy_dir, tmp_path):
    """The HF trainer alone is not deterministic (huggingface/tokenizers#1794)."""
    from nmtbench.data.tokenization import train_wordpiece

    corpus = [toy_dir / "mono.src"]
    for name in ("a", "b", "c"):
        train_wordpiece(corpus, tmp_path / name, 300)
    texts = [(tmp_path / n / "tokenizer.json").read_text() for n in ("a", "b", "c")]
    assert texts[0] == texts[1] == texts[2]
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "a"))
    assert set(tok.all_special_tokens) == {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}


def test_a_vocabulary_records_the_size_asked_for_outside_its_digest(toy_dir, tmp_path):
    """Its summary (what the report compares with the config's vocab_size) is a record: a
    vocabulary trained again for another size with the same pieces keeps its digest, and
    training into the directory again replaces it."""
    import json

    from nmtbench.provenance import path_digest

    train_wordpiece([toy_dir / "mono.src"], tmp_path / "v", 300)
    summary = json.loads((tmp_path / "v" / "vocabulary_summary.json").read_text())
    assert summary == {"vocab_size": 300, "lowercase": False, "min_frequency": 2}
    before = path_digest(tmp_path / "v")
    (tmp_path / "v" / "vocabulary_summary.json").write_text("{}")
    assert path_digest(tmp_path / "v") == before
    train_wordpiece([toy_dir / "mono.src"], tmp_path / "v", 301)
    assert json.loads((tmp_path / "v" / "vocabulary_summary.json").read_text())[
        "vocab_size"] == 301


def test_a_vocabulary_whose_declared_files_snakemake_deleted_trains_again(toy_dir, tmp_path):
    """Snakemake deletes a job's declared outputs before it runs it, not the undeclared
    summary: the directory left holding the summary alone is still this command's, so the
    workflow's tokenizer job can make the vocabulary again (a toy world made anew)."""
    from nmtbench.layout import TOKENIZER_OUTPUTS

    declared = [Path(output).name for output in TOKENIZER_OUTPUTS]
    train_wordpiece([toy_dir / "mono.src"], tmp_path / "v", 300)
    for name in declared:
        (tmp_path / "v" / name).unlink()
    assert [p.name for p in (tmp_path / "v").iterdir()] == ["vocabulary_summary.json"]
    train_wordpiece([toy_dir / "mono.src"], tmp_path / "v", 300)
    assert all((tmp_path / "v" / name).is_file() for name in declared)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="vocabulary"):
        train_wordpiece([toy_dir / "mono.src"], tmp_path / "w", 300)
    assert (tmp_path / "w" / "notes.txt").read_text() == "mine"


def test_an_empty_corpus_trains_no_vocabulary(tmp_path):
    """The trainer would save a vocabulary of the special tokens alone: refused instead."""
    empty = tmp_path / "train.src"
    empty.write_text("")
    with pytest.raises(InputError, match=f"^{empty}: no text to train a vocabulary on$"):
        train_wordpiece([empty], tmp_path / "tok", 50)
    assert not (tmp_path / "tok").exists()


@pytest.fixture(scope="module")
def byte_level(toy_dir, tmp_path_factory):
    """A GPT-2-style checkpoint directory: byte-level BPE whose one special is <|endoftext|>."""
    out = tmp_path_factory.mktemp("gpt2") / "gpt2"
    save_byte_level_gpt2(out, (toy_dir / "mono.src").read_text().splitlines()[:300])
    return out


def test_a_byte_level_vocabulary_reads_sentences_between_endoftext(byte_level, toy_dir):
    """GPT-2's <|endoftext|> is BOS and EOS; [PAD] and [MASK] come after its own ids, so the
    model's embeddings keep every row they had."""
    from nmtbench.data.tokenization import encode_sources, load_tokenizer

    plain = AutoTokenizer.from_pretrained(str(byte_level))
    tok = load_tokenizer(byte_level)
    vocab = vocab_of(tok)
    eot = plain.convert_tokens_to_ids("<|endoftext|>")
    assert vocab.bos == vocab.eos == vocab.unk == eot
    assert (vocab.pad, vocab.mask, vocab.size) == (len(plain), len(plain) + 1, len(plain) + 2)
    line = (toy_dir / "test.src").read_text().splitlines()[0]
    words = plain(line)["input_ids"]
    assert encode_sources(tok, [line], bos=True) == [[eot, *words, eot]]
    assert encode_sources(tok, [line], bos=False) == [[*words, eot]]


def test_byte_level_decoding_restores_every_test_sentence(byte_level, toy_dir):
    from nmtbench.data.tokenization import load_tokenizer

    tok = load_tokenizer(byte_level)
    lines = (toy_dir / "test.src").read_text().splitlines()
    assert all(decode(tok, tok(line)["input_ids"] + [tok.pad_token_id]) == line
               for line in lines)
    assert any(piece.startswith("Ġ") for piece in tok.tokenize(lines[0]))


MOSES_LINES = ["it 's a u.s. thing , don 't pay 12,000 or 3.5 % .",
               "a well-known e-mail - and a spaced dash -- here ...",
               "der Kinder- und Jugendbereich , 1,2 oder 1 , 2 ."]


def test_a_target_side_keeps_the_spacing_of_punctuation_inside_a_word(tmp_path):
    """The same vocabulary read as a source splits punctuation off; read as a target, its
    decoding is the Moses-tokenized line it encoded, so hypotheses match their references."""
    (tmp_path / "c.txt").write_text("\n".join(MOSES_LINES) + "\n", encoding="utf-8")
    train_wordpiece([tmp_path / "c.txt"], tmp_path / "vocab", vocab_size=200, min_frequency=1)
    source, target = (load_tokenizer(tmp_path / "vocab", target=t) for t in (False, True))
    for line in MOSES_LINES:
        assert decode(target, target(line)["input_ids"]) == line
    assert decode(source, source(MOSES_LINES[0])["input_ids"]).startswith("it ' s a u . s .")
