"""Pre-trained checkpoints: loading from disk, freezing, hidden states, offline snapshot
errors, and parameter counts from configs alone (checked against hand formulas)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_checkpoints import TINY, bert_param_count, save_tiny_bert
from transformers import BertConfig, BertModel

from nmtbench import cli
from nmtbench.errors import InputError
from nmtbench.parts.pretrained import (
    KNOWN_CONFIGS,
    freeze,
    load_model,
    model_config,
    snapshot,
)
from nmtbench.workflow.pretrained_names import checkpoint_dir

ROOT = Path(__file__).resolve().parents[2]


def offline_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
            "PYTHONPATH": str(ROOT)}


def tiny_bert(seed: int = 0) -> BertModel:
    torch.manual_seed(seed)
    return BertModel(BertConfig(**TINY), add_pooling_layer=False).eval()


# --- hand formulas of the NMT side (nmtbench/methods/transformer.py) ------------------------------
def attn(d: int, kdim: int | None = None) -> int:
    """q and out project d -> d, k and v kdim -> d, all with bias."""
    return 2 * (d * d + d) + 2 * ((kdim or d) * d + d)


def ffn(d: int, f: int) -> int:
    return d * f + f + f * d + d


def enc_layer(d: int, f: int) -> int:
    return attn(d) + ffn(d, f) + 2 * 2 * d  # two LayerNorms


def dec_layer(d: int, f: int, kdim: int | None = None) -> int:
    return attn(d) + attn(d, kdim) + ffn(d, f) + 3 * 2 * d  # three LayerNorms


# --- loading ------------------------------------------------------------------------------
def test_load_model_returns_the_saved_weights(tmp_path):
    """load_model(dir) gives exactly the saved weights; weights=False the same shapes, random."""
    saved = save_tiny_bert(tmp_path / "bert", mlm=False).state_dict()
    loaded = load_model(str(tmp_path / "bert")).state_dict()
    assert loaded.keys() == saved.keys()
    assert all(torch.equal(loaded[k], saved[k]) for k in saved)
    fresh = load_model(str(tmp_path / "bert"), weights=False).state_dict()
    assert {k: v.shape for k, v in fresh.items()} == {k: v.shape for k, v in saved.items()}
    assert not torch.equal(fresh["encoder.layer.0.attention.self.query.weight"],
                           saved["encoder.layer.0.attention.self.query.weight"])
    assert model_config(str(tmp_path / "bert")).hidden_size == 32


def test_settings_of_an_architecture_apply_without_its_weights(tmp_path):
    """A role's dropout on a checkpoint (bert-kd-teacher's) reaches the model built without
    weights (every run's model is built so before the first job) as it does with them."""
    save_tiny_bert(tmp_path / "bert", mlm=True)
    for weights in (True, False):
        model = load_model(str(tmp_path / "bert"), weights=weights, masked_lm=True,
                           hidden_dropout_prob=0.3)
        assert model.config.hidden_dropout_prob == 0.3
    assert model_config(str(tmp_path / "bert")).hidden_dropout_prob != 0.3


def test_pickle_weights_are_never_loaded(tmp_path):
    """A local BERT directory whose weights are pytorch_model.bin (a pickle: loading one can
    run code) is refused with one line; only safetensors load."""
    saved = save_tiny_bert(tmp_path / "bert", mlm=False)
    (tmp_path / "bert" / "model.safetensors").unlink()
    ran = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {ran}",))

    torch.save({"payload": Payload(), **saved.state_dict()},
               tmp_path / "bert" / "pytorch_model.bin")
    with pytest.raises(InputError) as err:
        load_model(str(tmp_path / "bert"))
    assert str(err.value) == (f"checkpoint '{tmp_path / 'bert'}': no safetensors weights "
                              "(pytorch_model.bin: pickle weights are never loaded, unpickling "
                              "can run code; convert them to safetensors)")
    assert not ran.exists()


def test_unreadable_checkpoint_files_are_one_line(tmp_path):
    save_tiny_bert(tmp_path / "bert", mlm=False)
    (tmp_path / "bert" / "model.safetensors").write_bytes(b"\x08" + bytes(7) + b"{}")
    with pytest.raises(InputError, match=f"^checkpoint '{tmp_path / 'bert'}': Error while "
                       "deserializing header"):
        load_model(str(tmp_path / "bert"))
    (tmp_path / "bert" / "config.json").write_text('{"model_type": "bert", ')
    with pytest.raises(InputError) as err:
        model_config(str(tmp_path / "bert"))
    assert str(err.value).startswith(f"checkpoint '{tmp_path / 'bert'}': ")
    assert "\n" not in str(err.value)


def test_snapshot_refuses_what_is_not_a_hub_name(tmp_path):
    with pytest.raises(InputError, match=r"^checkpoint '\.\./\.\./etc' is not a hub name"):
        snapshot("../../etc", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_hub_names_resolve_offline_without_weights(tmp_path):
    """Known hub names have their architecture offline; weights need a snapshot on disk."""
    cfg = model_config("bert-base-uncased")
    # BertModel of bert-base-uncased with its pooler is the well-known 109,482,240 parameters
    assert bert_param_count(cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers,
                            cfg.intermediate_size, cfg.max_position_embeddings,
                            cfg.type_vocab_size) + 768 * 768 + 768 == 109482240
    assert model_config("bert-base-german-cased").vocab_size == 30000
    assert set(KNOWN_CONFIGS) >= {"bert-base-cased", "bert-base-multilingual-cased", "gpt2"}
    with pytest.raises(InputError, match="snapshot"):
        load_model("bert-base-uncased")
    with pytest.raises(InputError, match="no config.json"):
        model_config("no-such-bert")


def test_checkpoint_dir(tmp_path):
    """Hub and pre-training names map under data/pretrained/; local checkpoint directories
    (holding config.json) stay; any other directory is not a checkpoint."""
    assert checkpoint_dir("bert-base-uncased") == "data/pretrained/bert-base-uncased"
    assert checkpoint_dir("toy-bert-src", {"toy-bert-src": {}}) == "data/pretrained/toy-bert-src"
    (tmp_path / "config.json").write_text("{}")
    assert checkpoint_dir(str(tmp_path)) == str(tmp_path)
    with pytest.raises(InputError, match="holds no config.json: not a Hugging Face checkpoint"):
        checkpoint_dir(str(ROOT / "config"))
    for bad in ("./no/such/dir", "bad name!"):
        with pytest.raises(InputError):
            checkpoint_dir(bad)


# --- freezing -------------------------------------------------------------------------------
@pytest.mark.parametrize("policy, trainable", [
    ("all", lambda n: False),
    (True, lambda n: False),
    ("none", lambda n: True),
    (False, lambda n: True),
    ("embeddings", lambda n: not n.startswith("embeddings.")),
    ("below-top-1", lambda n: n.startswith("encoder.layer.1.")),
    ("below-top-2", lambda n: n.startswith("encoder.layer.")),
])
def test_freeze_policies(policy, trainable):
    """Each policy leaves exactly its parameters trainable (resetting an earlier freeze)."""
    bert = tiny_bert()
    freeze(bert, "all")
    freeze(bert, policy)
    for name, p in bert.named_parameters():
        assert p.requires_grad == trainable(name), name


@pytest.mark.parametrize("policy", ["top-2", "below-top-3", "below-top-x", "frozen"])
def test_unknown_freeze_policy_is_an_input_error(policy):
    """Unknown policies (and more top layers than the model has) are InputErrors."""
    with pytest.raises(InputError, match="freeze policy"):
        freeze(tiny_bert(), policy)


# --- snapshot offline ----------------------------------------------------------------------
def test_snapshot_offline_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    """Offline with an empty cache: one-line InputError naming the checkpoint; no out dir."""
    import huggingface_hub.constants as hf

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(hf, "HF_HUB_OFFLINE", True)  # read at import, so set here too
    monkeypatch.setattr(hf, "HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(hf, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    out = tmp_path / "pretrained" / "out"
    with pytest.raises(InputError) as err:
        snapshot("bert-base-uncased", out)
    message = str(err.value)
    assert "\n" not in message and "bert-base-uncased" in message and "snapshot" in message
    assert not out.exists() and list(out.parent.iterdir()) == []  # no temporary left either


def test_snapshot_cli_offline_exits_2_with_one_line(tmp_path):
    """`python -m nmtbench snapshot` offline: exit 2, a single stderr line `error: ...`."""
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "nmtbench", "snapshot", "bert-base-uncased",
                           "--out", str(out)], capture_output=True, text=True, cwd=tmp_path,
                          env=offline_env(tmp_path), timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert "bert-base-uncased" in lines[0] and not out.exists()


# --- params -------------------------------------------------------------------------------
@pytest.fixture
def tiny_config(tmp_path):
    """A config file (merged over config/config.yaml) with a dataset whose source checkpoint
    is a tiny saved BERT, and two tiny experiments."""
    save_tiny_bert(tmp_path / "bert")
    config = {
        "datasets": {"tinyparams": {
            "kind": "iwslt14", "src_lang": "de", "tgt_lang": "en",
            "vocab_size": {"src": 50, "tgt": 40}, "lowercase": False,
            "detok_lang": "en", "checkpoints": {"src": str(tmp_path / "bert")}}},
        "experiments": {
            "tiny-frozen": {"method": "bert-frozen", "size": "tiny", "d_model": 16,
                            "ffn_dim": 24, "n_heads": 2, "decoder_layers": 1},
            "tiny-transformer": {"method": "transformer", "size": "tiny", "d_model": 16,
                                 "ffn_dim": 24, "n_heads": 2, "encoder_layers": 1,
                                 "decoder_layers": 2}},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def params_cli(tmp_path: Path, *args: str) -> dict[str, int]:
    proc = subprocess.run([sys.executable, "-m", "nmtbench", "params", *args, "--root",
                           str(ROOT)], capture_output=True, text=True, cwd=tmp_path,
                          env=offline_env(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def params_inprocess(capsys, *args: str) -> dict[str, int]:
    assert cli.main(["params", *args, "--root", str(ROOT)]) == 0
    return json.loads(capsys.readouterr().out)


def test_params_cli_tiny_bert_frozen_matches_hand_count(tmp_path, tiny_config):
    """bert-frozen: total = BERT + decoder (cross-attn k/v from width 32) + target embeddings;
    trained = all but the BERT."""
    bert = bert_param_count(V=100, H=32, L=2, I=64, P=64)
    nmt = 40 * 16 + 1 * dec_layer(16, 24, kdim=32)  # tied output projection, post-norm
    got = params_cli(tmp_path, "tiny-frozen", "--dataset", "tinyparams", "--configfile",
                     str(tiny_config))
    assert got == {"total": bert + nmt, "trained": nmt}


def test_params_tiny_transformer_matches_hand_count(tmp_path, tiny_config, capsys,
                                                    monkeypatch):
    """transformer: the source vocabulary is the dataset's BERT's (100), the target its
    configured size (40)."""
    monkeypatch.chdir(tmp_path)
    expected = (100 + 40) * 16 + 1 * enc_layer(16, 24) + 2 * dec_layer(16, 24)
    got = params_inprocess(capsys, "tiny-transformer", "--dataset", "tinyparams",
                           "--configfile", str(tiny_config))
    assert got == {"total": expected, "trained": expected}


def test_params_cli_transformer_base_on_paper_settings(tmp_path):
    """transformer-base on wmt14-en-de (BERT vocabularies 28996 + 30000, d 512): 74,344,448."""
    d, f = 512, 2048
    expected = (28996 + 30000) * d + 6 * enc_layer(d, f) + 6 * dec_layer(d, f)
    assert expected == 74344448
    assert params_cli(tmp_path, "transformer-base", "--dataset", "wmt14-en-de") == {
        "total": expected, "trained": expected}


def test_params_bert_frozen_on_paper_settings(tmp_path, capsys, monkeypatch):
    """bert-frozen on iwslt14-de-en: the frozen bert-base-german-cased counts but does not
    train; the base decoder reads its width 768."""
    monkeypatch.chdir(tmp_path)
    bert = bert_param_count(V=30000, H=768, L=12, I=3072, P=512)
    nmt = 30522 * 512 + 6 * dec_layer(512, 2048, kdim=768)
    got = params_inprocess(capsys, "bert-frozen", "--dataset", "iwslt14-de-en")
    assert got["trained"] < got["total"]
    assert got == {"total": bert + nmt, "trained": nmt}


def test_params_counts_a_toy_pretrained_bert_before_it_exists(tmp_path, capsys, monkeypatch):
    """On the embedded default, bert-frozen's toy-bert-src is counted from its pre-training
    settings (d 128, FFN 512, 3 layers, 256 positions) over the toy source vocabulary."""
    monkeypatch.chdir(tmp_path)  # no data/: vocabularies are the configured sizes
    bert = bert_param_count(V=2000, H=128, L=3, I=512, P=256)
    nmt = 1500 * 128 + 3 * dec_layer(128, 512, kdim=128)  # tiny on the toy world
    got = params_inprocess(capsys, "bert-frozen", "--dataset", "toy", "--configfile",
                           str(ROOT / "config" / "config.yaml"))
    assert got == {"total": bert + nmt, "trained": nmt}
