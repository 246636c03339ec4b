"""Export to Hugging Face (FSMT): same weights, same loss, same translations, one tokenizer."""

import json
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from nmtbench.cli import main
from nmtbench.data.tokenization import decode, encode_sources
from nmtbench.errors import InputError
from nmtbench.evaluation.translate import load_run_model
from nmtbench.export.fsmt import EXPORTED, export_run, to_ctranslate2
from nmtbench.fileio import read_lines
from nmtbench.parts.batches import Bitext
from nmtbench.parts.beam_search import beam_search
from nmtbench.training.trainer import Trainer

CFG = {"method": "transformer", "size": "tiny", "d_model": 64, "ffn_dim": 128, "n_heads": 4,
       "encoder_layers": 2, "decoder_layers": 2, "max_tokens": 600, "lr": 0.003,
       "warmup_updates": 20, "clip_norm": 1.0, "max_epochs": 8, "seed": 1}


@pytest.fixture(scope="module")
def exported(toy_paths, tmp_path_factory):
    """A Transformer trained until most test sentences end before the length cap, exported."""
    root = tmp_path_factory.mktemp("export")
    Trainer(root / "run", CFG, toy_paths, device="cpu").run()
    out = export_run(root / "run", root / "hf")
    return root / "run", out


def test_exported_model_gives_our_loss(exported, toy_paths):
    run, out = exported
    ours, src_tok, tgt_tok, _ = load_run_model(run, device="cpu")
    hf = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    data = Bitext.load(toy_paths.valid_src, toy_paths.valid_tgt, src_tok, tgt_tok, 1024,
                       src_bos=False)
    batch = data.collate(list(range(16)))
    with torch.no_grad():
        nll = float(ours.losses(batch).stats["nll"])  # a 0-d tensor: the trainer reads it
        logits = hf(input_ids=batch.src, attention_mask=batch.src.ne(0),
                    decoder_input_ids=batch.tgt_in, use_cache=False).logits
    theirs = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(),
                             ignore_index=tgt_tok.pad_token_id).item()
    assert theirs == pytest.approx(nll, rel=1e-5)


def test_generate_returns_our_beam_search(exported, toy_paths):
    """Beam 5 per sentence; where the length cap is reached the two differ by design (HF's
    forced EOS gets log-prob 0, fairseq's and ours keeps the model's), so those are left out
    and must be few."""
    run, out = exported
    ours, src_tok, _, _ = load_run_model(run, device="cpu")
    hf = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    v = ours.tgt_vocab
    compared = 0
    lines = read_lines(toy_paths.valid_src)
    for ids in encode_sources(src_tok, lines, bos=False):
        src = torch.tensor([ids])
        cap = int(1.2 * len(ids) + 10)
        mine = beam_search(ours, src, beam=5, vocab=v, lenpen=1.0)[0]
        if len(mine) == cap:
            continue
        generated = hf.generate(input_ids=src, num_beams=5, early_stopping=True,
                                length_penalty=1.0, max_new_tokens=cap + 1,
                                forced_eos_token_id=v.eos)[0].tolist()
        assert generated[0] == v.bos and generated[len(mine) + 1] == v.eos
        assert generated[1:len(mine) + 1] == mine
        compared += 1
    assert compared >= 0.9 * len(lines)


def test_tokenizer_encodes_sources_and_decodes_targets(exported, toy_paths):
    run, out = exported
    ours, src_tok, tgt_tok, _ = load_run_model(run, device="cpu")
    tokenizer = AutoTokenizer.from_pretrained(out, trust_remote_code=True)
    lines = read_lines(toy_paths.valid_src)[:8]
    assert tokenizer(lines)["input_ids"] == encode_sources(src_tok, lines, bos=False)
    targets = read_lines(toy_paths.valid_tgt)[:8]
    ids = [[tgt_tok.cls_token_id, *row, tgt_tok.sep_token_id]
           for row in tgt_tok(targets, add_special_tokens=False)["input_ids"]]
    assert tokenizer.batch_decode(ids, skip_special_tokens=True) == [
        decode(tgt_tok, row) for row in ids]
    # saved again, it loads again (the pair and this module travel together)
    tokenizer.save_pretrained(out.parent / "again")
    again = AutoTokenizer.from_pretrained(out.parent / "again", trust_remote_code=True)
    assert again(lines)["input_ids"] == tokenizer(lines)["input_ids"]
    assert json.loads((out / "tokenizer_config.json").read_text())["source_bos"] is False


def test_export_cli_refuses_what_fsmt_cannot_hold(toy_paths, tmp_path, capsys):
    Trainer(tmp_path / "pre", {**CFG, "max_epochs": 1, "pre_norm": True}, toy_paths,
            device="cpu").run()
    with pytest.raises(InputError, match="pre-norm Transformer has no exact FSMT form"):
        export_run(tmp_path / "pre", tmp_path / "out")
    assert main(["export", "--run-dir", str(tmp_path / "none"), "--out",
                 str(tmp_path / "out")]) != 0
    assert "no config.json" in capsys.readouterr().err


def test_ctranslate2_conversion_translates_as_we_do(exported, toy_paths, tmp_path):
    """CTranslate2 (float32) on the converted weights: the same beam-5 output for nearly every
    sentence below the length cap (its own kernels may break near-ties otherwise)."""
    import ctranslate2

    run, out = exported
    ours, src_tok, tgt_tok, _ = load_run_model(run, device="cpu")
    hf = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    translator = ctranslate2.Translator(str(to_ctranslate2(hf, src_tok, tgt_tok,
                                                           tmp_path / "ct2")),
                                        device="cpu", compute_type="float32")
    v = ours.tgt_vocab
    same = compared = 0
    for ids in encode_sources(src_tok, read_lines(toy_paths.valid_src), bos=False):
        cap = int(1.2 * len(ids) + 10)
        mine = beam_search(ours, torch.tensor([ids]), beam=5, vocab=v,
                           lenpen=1.0)[0]
        if len(mine) == cap:
            continue
        result = translator.translate_batch([src_tok.convert_ids_to_tokens(ids)], beam_size=5,
                                            length_penalty=1.0, max_decoding_length=cap + 1)
        same += tgt_tok.convert_tokens_to_ids(result[0].hypotheses[0]) == mine
        compared += 1
    assert compared >= 30 and same >= 0.95 * compared


def test_the_documented_snippet_runs_on_an_export(exported, capsys):
    _, out = exported
    section = (Path(__file__).resolve().parents[2] / "docs" / "performance.md").read_text().split(
        "## Hugging Face export", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(code.replace('"hf-model"', repr(str(out))), {})  # noqa: S102 (our own docs)
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("['") and len(printed) > 6


def test_export_replaces_an_earlier_export_but_no_other_directory(exported, tmp_path):
    run, out = exported
    again = export_run(run, out)  # the same directory: an earlier export, replaced
    assert json.loads((again / EXPORTED).read_text())["run_dir"] == str(run)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text("{}")  # another model, say
    with pytest.raises(InputError, match="not an earlier output of this command"):
        export_run(run, mine)
    assert [p.name for p in mine.iterdir()] == ["config.json"]
