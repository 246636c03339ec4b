"""Export to Hugging Face (FSMT): same weights, same loss, same translations, stock tokenizers."""

import json
import os
import re
import subprocess
import sys
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
from nmtbench.export.hf_tokenizer import TARGET, save_tokenizers
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


def test_tokenizers_encode_sources_and_decode_targets_as_we_do(exported, toy_paths):
    run, out = exported
    _, src_tok, tgt_tok, _ = load_run_model(run, device="cpu")
    source = AutoTokenizer.from_pretrained(out)
    target = AutoTokenizer.from_pretrained(out, subfolder=TARGET)
    lines = read_lines(toy_paths.valid_src)[:8]
    assert source(lines).keys() == {"input_ids", "attention_mask"}  # what FSMT takes
    assert source(lines)["input_ids"] == encode_sources(src_tok, lines, bos=False)
    # a punctuation character inside a word is its continuation piece, spaces before
    # punctuation stay (the saved BERT decoder would "clean them up")
    targets = [*read_lines(toy_paths.valid_tgt)[:8], "ze . gomunori , ze.ze"]
    ids = [[tgt_tok.cls_token_id, *row, tgt_tok.sep_token_id]
           for row in tgt_tok(targets, add_special_tokens=False)["input_ids"]]
    assert target.batch_decode(ids, skip_special_tokens=True) == [
        decode(tgt_tok, row) for row in ids]
    assert target(targets, add_special_tokens=False)["input_ids"] == tgt_tok(
        targets, add_special_tokens=False)["input_ids"]
    # saved again, they load again
    source.save_pretrained(out.parent / "again")
    again = AutoTokenizer.from_pretrained(out.parent / "again")
    assert again(lines)["input_ids"] == source(lines)["input_ids"]


def test_a_source_bos_is_saved_in_the_source_template(exported, tmp_path):
    """A model that reads `[CLS] x [SEP]` gets a source tokenizer that writes it."""
    run, _ = exported
    _, src_tok, tgt_tok, _ = load_run_model(run, device="cpu")
    save_tokenizers(src_tok, tgt_tok, True, tmp_path)
    lines = ["lekuvo bamiri ze gomunori ."]
    assert AutoTokenizer.from_pretrained(tmp_path)(lines)["input_ids"] == encode_sources(
        src_tok, lines, bos=True)


# A Hub user's translation, in a process of its own: stock classes only, nothing of nmtbench
HUB_USER = """
import json, sys
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

out, lines = sys.argv[1], json.loads(sys.stdin.read())
model = AutoModelForSeq2SeqLM.from_pretrained(out).eval()
source = AutoTokenizer.from_pretrained(out)
target = AutoTokenizer.from_pretrained(out, subfolder="target_tokenizer")
translations = []
for line in lines:
    batch = source([line], return_tensors="pt")
    cap = int(1.2 * batch["input_ids"].size(1) + 10)
    ids = model.generate(**batch, num_beams=5, early_stopping=True, length_penalty=1.0,
                         max_new_tokens=cap + 1, forced_eos_token_id=model.config.eos_token_id)
    translations += target.batch_decode(ids, skip_special_tokens=True)
assert not any(name.startswith("nmtbench") for name in sys.modules)
print(json.dumps(translations))
"""


def test_the_export_loads_and_translates_in_a_fresh_process_as_we_do(exported, toy_paths,
                                                                     tmp_path):
    """AutoTokenizer and AutoModelForSeq2SeqLM without `trust_remote_code`, in a new Python
    process, translate the valid sentences into the text nmtbench's own beam search and
    decoding give (those below the length cap: HF's forced EOS scores otherwise there)."""
    run, out = exported
    ours, src_tok, tgt_tok, _ = load_run_model(run, device="cpu")
    lines, expected = [], []
    every = read_lines(toy_paths.valid_src)
    for line, ids in zip(every, encode_sources(src_tok, every, bos=False), strict=True):
        mine = beam_search(ours, torch.tensor([ids]), beam=5, vocab=ours.tgt_vocab,
                           lenpen=1.0)[0]
        if len(mine) < int(1.2 * len(ids) + 10):
            lines.append(line)
            expected.append(decode(tgt_tok, mine))
    assert len(lines) >= 0.9 * len(every)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run([sys.executable, "-c", HUB_USER, str(out)], input=json.dumps(lines),
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**env, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == expected
    assert "trust_remote_code" not in HUB_USER
    assert not list(out.rglob("*.py"))  # no code of ours travels with the model


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
    assert "trust_remote_code" not in code
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
