"""Strict corpus reading and token-based batching."""

import pytest
from transformers import AutoTokenizer

from nmtbench.errors import InputError
from nmtbench.parts.batches import Bitext, read_parallel, token_batches


def write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_line_count_mismatch_names_both_files(tmp_path):
    src = write(tmp_path / "a.src", b"one\ntwo\n")
    tgt = write(tmp_path / "a.tgt", b"eins\n")
    with pytest.raises(InputError, match=r"a\.src has 2 lines but .*a\.tgt has 1"):
        read_parallel(src, tgt)


def test_empty_line_names_file_and_line(tmp_path):
    src = write(tmp_path / "a.src", b"one\n\nthree\n")
    tgt = write(tmp_path / "a.tgt", b"eins\nzwei\ndrei\n")
    with pytest.raises(InputError, match=r"a\.src:2: empty line"):
        read_parallel(src, tgt)


def test_non_utf8_names_file_and_line(tmp_path):
    src = write(tmp_path / "a.src", b"one\ntwo\nth\xffree\n")
    tgt = write(tmp_path / "a.tgt", b"eins\nzwei\ndrei\n")
    with pytest.raises(InputError, match=r"a\.src:3: not valid UTF-8"):
        read_parallel(src, tgt)


@pytest.fixture(scope="module")
def data(toy_dir):
    src_tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_src"))
    tgt_tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_tgt"))
    return Bitext.load(toy_dir / "train.src", toy_dir / "train.tgt", src_tok, tgt_tok)


def test_long_pairs_are_dropped_and_counted(toy_dir, caplog):
    src_tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_src"))
    tgt_tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_tgt"))
    full = Bitext.load(toy_dir / "train.src", toy_dir / "train.tgt", src_tok, tgt_tok)
    short = Bitext.load(toy_dir / "train.src", toy_dir / "train.tgt", src_tok, tgt_tok,
                        max_positions=32)
    expected = sum(len(s) <= 32 and len(t) <= 32 for s, t in zip(full.src, full.tgt, strict=False))
    assert len(short) == expected < len(full)
    assert f"dropped {len(full) - expected} of {len(full)}" in caplog.text


@pytest.mark.parametrize("max_positions", [4, 12])
def test_a_max_positions_that_drops_most_pairs_stops_with_one_line(toy_dir, max_positions):
    """max_positions 4 leaves no pair (training would 'finish' after 0 steps), 12 fewer than
    half: what is left is not the corpus the run names; it stops."""
    src_tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_src"))
    tgt_tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_tgt"))
    full = Bitext.load(toy_dir / "valid.src", toy_dir / "valid.tgt", src_tok, tgt_tok)
    dropped = sum(max(len(s), len(t)) > max_positions for s, t in zip(full.src, full.tgt,
                                                                       strict=True))
    assert dropped >= 20  # of 40
    with pytest.raises(InputError) as err:
        Bitext.load(toy_dir / "valid.src", toy_dir / "valid.tgt", src_tok, tgt_tok,
                    max_positions=max_positions)
    assert str(err.value) == (f"{toy_dir / 'valid.src'}: {dropped} of 40 pairs are longer "
                              f"than max_positions ({max_positions} tokens); raise the setting "
                              "max_positions")


def test_empty_parallel_files_stop_with_one_line(toy_dir, tmp_path):
    src_tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_src"))
    tgt_tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_tgt"))
    src, tgt = write(tmp_path / "a.src", b""), write(tmp_path / "a.tgt", b"")
    with pytest.raises(InputError, match=f"^{src}: no sentence pairs$"):
        Bitext.load(src, tgt, src_tok, tgt_tok)


def test_batches_cover_every_example_once_within_the_token_budget(data):
    batches = data.batches(max_tokens=300, shuffle_seed=1)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(data)))
    for b in batches:
        longest = max(max(len(data.src[i]), len(data.tgt[i]) - 1) for i in b)
        assert longest * len(b) <= 300 or len(b) == 1


# Lengths in order, and the batch sizes fairseq 0.12.2's data_utils.batch_by_size makes of them
# with max_tokens=40 (recorded from fairseq; benchmarks/parity compares the two on random input).
LENGTHS = [2] * 13 + [3] * 9 + [5] * 7 + [9] * 6 + [12] * 3 + [30, 40]


@pytest.mark.parametrize("multiple, sizes", [(8, [8, 8, 8, 5, 4, 3, 2, 1, 1]),
                                             (1, [13, 9, 7, 4, 3, 2, 1, 1])])
def test_token_batches_are_fairseqs(multiple, sizes):
    batches = token_batches(list(range(len(LENGTHS))), LENGTHS, 40, multiple=multiple)
    assert [len(b) for b in batches] == sizes
    assert [i for b in batches for i in b] == list(range(len(LENGTHS)))


@pytest.mark.parametrize("max_sentences", [1, 3, 5])
def test_batches_hold_at_most_max_sentences(max_sentences):
    """fairseq's --batch-size: the sentence cap closes a batch before the token cap would."""
    batches = token_batches(list(range(len(LENGTHS))), LENGTHS, 2000,
                            max_sentences=max_sentences)
    assert max(len(b) for b in batches) == max_sentences
    assert [i for b in batches for i in b] == list(range(len(LENGTHS)))
    assert len(token_batches(list(range(len(LENGTHS))), LENGTHS, 2000)) == 1  # no cap: one


def test_batches_order_by_source_then_target_and_count_the_decoder_input():
    """fairseq sorts by source length, then target length; an example takes as many tokens
    as its longer tensor: the source, or the decoder input ([CLS] y, one shorter than y's
    [CLS] y [SEP])."""
    data = Bitext(src=[[1, 5, 6, 2], [1, 5, 2], [1, 5, 2], [1, 5, 6, 2]],
                  tgt=[[1, 7, 2], [1, 7, 8, 9, 2], [1, 7, 8, 2], [1, 7, 8, 2]],
                  src_pad=0, tgt_pad=0)
    assert [i for b in data.batches(max_tokens=100) for i in b] == [2, 1, 0, 3]
    assert data.batches(max_tokens=8) == [[2, 1], [0, 3]]  # four tokens each, not five


def test_batch_order_depends_only_on_the_seed(data):
    assert data.batches(300, shuffle_seed=4) == data.batches(300, shuffle_seed=4)
    assert data.batches(300, shuffle_seed=4) != data.batches(300, shuffle_seed=5)


def test_sources_start_with_cls_only_for_models_that_read_it(toy_dir, data):
    """fairseq's Transformer reads x </s>; a BERT reads [CLS] x [SEP]."""
    src_tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_src"))
    tgt_tok = AutoTokenizer.from_pretrained(str(toy_dir / "tok_tgt"))
    plain = Bitext.load(toy_dir / "train.src", toy_dir / "train.tgt", src_tok, tgt_tok,
                        src_bos=False)
    assert [s[1:] for s in data.src] == plain.src
    assert {s[0] for s in data.src} == {src_tok.cls_token_id}
    assert {s[-1] for s in plain.src} == {src_tok.sep_token_id}
    assert plain.tgt == data.tgt  # the decoder's BOS is [CLS] either way


def test_collate_shifts_target(data):
    batch = data.collate([0, 1, 2])
    tgt = data.tgt[0]
    assert batch.tgt_in[0, : len(tgt) - 1].tolist() == tgt[:-1]
    assert batch.tgt_out[0, : len(tgt) - 1].tolist() == tgt[1:]
    assert batch.src.shape[0] == 3 and batch.ids.tolist() == [0, 1, 2]
