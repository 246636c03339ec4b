"""Pre-trained checkpoints: where they live, what they look like, and how methods use them.

A checkpoint is named in config by a Hugging Face hub name (`bert-base-uncased`), a local
directory, or a name the config pre-trains on the toy world (`toy-bert-src`). Hub names are
snapshotted once to `data/pretrained/<name>/` (rules/pretrained.smk), so training jobs load
from disk only, with `HF_HUB_OFFLINE=1` on cluster nodes. Everything is loaded through
`transformers` (`AutoConfig`, `AutoModel`, `AutoTokenizer` on a directory), the same call for a
real BERT and for the toy world's tiny ones.

The architecture facts of every checkpoint the papers name are shipped here, so the DAG can be
planned and parameters counted (`python -m nmtbench params`) with no download.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import nn

if TYPE_CHECKING:  # imported where used: planning the DAG does not load transformers
    from transformers import PretrainedConfig

from nmtbench import layout
from nmtbench.errors import InputError, one_line
from nmtbench.fileio import atomic_directory
from nmtbench.workflow.pretrained_names import HUB_NAME

if TYPE_CHECKING:
    from nmtbench.data.tokenization import Vocab
    from nmtbench.workflow.pretrain_settings import PretrainConfig

_BERT_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                  intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)
_BERT_LARGE = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                   intermediate_size=4096, max_position_embeddings=512, type_vocab_size=2)
# The config.json facts of the checkpoints the papers use (Hugging Face hub, 2019 releases):
# model type and settings.
KNOWN_CONFIGS: dict[str, tuple[str, dict[str, int]]] = {
    "bert-base-uncased": ("bert", dict(vocab_size=30522, **_BERT_BASE)),
    "bert-base-cased": ("bert", dict(vocab_size=28996, **_BERT_BASE)),
    "bert-base-german-cased": ("bert", dict(vocab_size=30000, **_BERT_BASE)),
    "bert-base-multilingual-cased": ("bert", dict(vocab_size=119547, **_BERT_BASE)),
    "bert-large-cased": ("bert", dict(vocab_size=28996, **_BERT_LARGE)),
    "gpt2": ("gpt2", dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12,
                          n_head=12)),
}

log = logging.getLogger(__name__)


class UnknownArchitecture(InputError):
    """A checkpoint whose architecture is known only once it is downloaded."""


# Files a snapshot needs: config, vocabulary/tokenizer files and safetensors weights.
SNAPSHOT_PATTERNS = ["*.json", "*.txt", "*.model", "*.safetensors"]


def model_config(name_or_dir: str | PretrainedConfig) -> PretrainedConfig:
    """The architecture of a checkpoint: its directory's config.json, else the shipped facts
    (an architecture passed in is returned as it is)."""
    from transformers import AutoConfig, PretrainedConfig

    if isinstance(name_or_dir, PretrainedConfig):
        return name_or_dir
    path = Path(name_or_dir)
    if (path / layout.HF_CONFIG_NAME).is_file():
        try:
            return AutoConfig.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError) as err:
            raise InputError(f"checkpoint {name_or_dir!r}: {one_line(err)}") from None
    if name_or_dir in KNOWN_CONFIGS:
        model_type, settings = KNOWN_CONFIGS[name_or_dir]
        return AutoConfig.for_model(model_type, **settings)
    raise UnknownArchitecture(f"checkpoint {name_or_dir!r}: no config.json there and no "
                              f"architecture known offline (known: {', '.join(KNOWN_CONFIGS)})")


def architecture(cfg: PretrainConfig, vocab: Vocab) -> PretrainedConfig:
    """The Hugging Face config of the model toy-world pre-training (`cfg`) makes over
    `vocab`: the architecture of a checkpoint the DAG pre-trains (one line where no model of
    that architecture can be built)."""
    from transformers import BertConfig, GPT2Config

    if cfg.d_model % cfg.n_heads:
        raise InputError(f"a {cfg.model} of d_model {cfg.d_model} cannot have {cfg.n_heads} "
                         "attention heads: d_model must be a multiple of n_heads")
    if cfg.model == "bert":
        return BertConfig(vocab_size=vocab.size, hidden_size=cfg.d_model,
                          num_hidden_layers=cfg.layers, num_attention_heads=cfg.n_heads,
                          intermediate_size=cfg.ffn_dim, max_position_embeddings=cfg.max_positions,
                          hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout,
                          pad_token_id=vocab.pad)
    return GPT2Config(vocab_size=vocab.size, n_embd=cfg.d_model, n_layer=cfg.layers,
                      n_head=cfg.n_heads, n_inner=cfg.ffn_dim, n_positions=cfg.max_positions,
                      resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout, attn_pdrop=cfg.dropout,
                      bos_token_id=vocab.bos, eos_token_id=vocab.eos, pad_token_id=vocab.pad)


def load_model(name_or_dir: str | PretrainedConfig, weights: bool = True,
               masked_lm: bool = False, **kwargs: Any) -> nn.Module:
    """The checkpoint's base model (`AutoModel`), or with `masked_lm` the model with its
    masked-LM head (`AutoModelForMaskedLM`): its weights from disk, or, with `weights=False`,
    its architecture with random weights (counting, or before loading a trained run's state).
    Never downloads: hub names are snapshotted by their rule first. Loads safetensors
    weights only: pickle weights (pytorch_model.bin) can run code when unpickled, so a
    directory with only those is refused, not loaded."""
    from safetensors import SafetensorError
    from transformers import AutoModel, AutoModelForMaskedLM

    auto = AutoModelForMaskedLM if masked_lm else AutoModel
    if not weights:  # another kind of model than a role takes (a GPT-2 as a BERT): one line
        config = copy.deepcopy(model_config(name_or_dir))
        for key in [k for k in kwargs if k in config.to_dict()]:  # its settings (a dropout),
            setattr(config, key, kwargs.pop(key))  # which from_pretrained takes, from_config not
        try:
            return auto.from_config(config, **kwargs)
        except (ValueError, TypeError) as err:
            reason = one_line(err).split(". Model type should be")[0]  # not the whole list
            raise InputError(f"checkpoint {_named(name_or_dir)}: a {config.model_type} model, "
                             f"which this role cannot take ({reason})") from None
    path = Path(name_or_dir)
    if not (path / layout.HF_CONFIG_NAME).is_file():
        raise InputError(f"checkpoint {name_or_dir!r} is not on disk; snapshot it first "
                         f"(python -m nmtbench snapshot {path.name})")
    if not any(path.glob("*.safetensors")):
        pickled = sorted(p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".pth"))
        raise InputError(f"checkpoint {name_or_dir!r}: no safetensors weights"
                         + (f" ({', '.join(pickled)}: pickle weights are never loaded, "
                            "unpickling can run code; convert them to safetensors)"
                            if pickled else ""))
    try:
        return auto.from_pretrained(str(path), local_files_only=True, use_safetensors=True,
                                    **kwargs)
    except (OSError, ValueError, TypeError, SafetensorError) as err:
        raise InputError(f"checkpoint {name_or_dir!r}: {one_line(err)}") from None


def _named(name_or_dir: str | PretrainedConfig) -> str:
    """A checkpoint for a message: its name or directory, or the architecture it stands for."""
    return repr(str(name_or_dir)) if isinstance(name_or_dir, str | Path) else "(one the DAG makes)"


def check_vocab(size: int, bert: nn.Module, side: str) -> None:
    """A side read by a BERT must use (at most) the BERT's own vocabulary."""
    if size > bert.config.vocab_size:
        raise InputError(f"the {side} vocabulary has {size} entries but its BERT has "
                         f"{bert.config.vocab_size}: tokenize with the BERT's own")


FREEZE_POLICIES = "all, none, embeddings, or below-top-K (all but the top K layers)"


def freeze(bert: nn.Module, policy: str | bool) -> None:
    """Set requires_grad by policy: `all` (true) freezes everything, `none` (false) nothing,
    `embeddings` the embedding layer only, `below-top-K` the embeddings and every layer
    under the top K (so only the top K layers train)."""
    policy = {True: "all", False: "none"}.get(policy, policy)  # type: ignore[arg-type]
    layers = list(bert.encoder.layer)
    if policy == "all":
        frozen: list[nn.Module] = [bert]
    elif policy == "none":
        frozen = []
    elif policy == "embeddings":
        frozen = [bert.embeddings]
    elif isinstance(policy, str) and (m := re.fullmatch(r"below-top-(\d+)", policy)):
        k = int(m.group(1))
        if k > len(layers):
            raise InputError(f"freeze policy {policy!r}: the model has only {len(layers)} "
                             "layers")
        frozen = [bert.embeddings, *layers[: len(layers) - k]]
    else:
        raise InputError(f"unknown freeze policy {policy!r}; use {FREEZE_POLICIES}")
    for p in bert.parameters():
        p.requires_grad_(True)
    for module in frozen:
        for p in module.parameters():
            p.requires_grad_(False)


def lacking(files: list[str]) -> str | None:
    """What a hub repository of these files lacks for a snapshot (config.json, safetensors
    weights), or None."""
    if layout.HF_CONFIG_NAME not in files:
        return "the hub repository has no config.json"
    if not any(f.endswith(".safetensors") for f in files):
        return ("the hub repository has no safetensors weights; convert it and name its local "
                "directory in config")
    return None


def check_on_hub(names: list[str], timeout: float = 10.0) -> None:
    """Before any job: each hub checkpoint the workflow will snapshot is on the hub with what
    a snapshot needs, as the hub's file list says (one line naming the first that is not).
    Offline (HF_HUB_OFFLINE) or with the hub out of reach, nothing is asked: the snapshot job
    says what it finds."""
    import httpx2  # huggingface_hub's HTTP client: its connection errors are its own
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return
    api = HfApi()
    for name in names:
        try:
            info = api.model_info(name, timeout=timeout)
        except RepositoryNotFoundError:
            raise InputError(f"checkpoint {name!r}: no such repository on the hub "
                             f"({api.endpoint})") from None
        except (HfHubHTTPError, httpx2.TransportError, OSError) as err:  # the job will tell
            log.warning("checkpoint %r: the hub did not answer (%s)", name, type(err).__name__)
            return
        if why := lacking([s.rfilename for s in info.siblings or []]):
            raise InputError(f"checkpoint {name!r}: {why} ({api.endpoint})")


def snapshot(name: str, out: str | Path) -> Path:
    """Download the hub checkpoint `name` into `out` (config, tokenizer files, safetensors
    weights), atomically: a failed download leaves nothing at `out`. Offline and missing, one
    line says which checkpoint and how to provide it."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    if not re.fullmatch(HUB_NAME, name):
        raise InputError(f"checkpoint {name!r} is not a hub name (NAME or ORGANISATION/NAME)")
    out = Path(out)
    try:
        with atomic_directory(out, layout.HF_CONFIG_NAME) as tmp:
            snapshot_download(repo_id=name, local_dir=tmp, allow_patterns=SNAPSHOT_PATTERNS)
            if why := lacking([p.name for p in tmp.iterdir()]):
                raise InputError(f"checkpoint {name!r}: {why}")
            shutil.rmtree(tmp / ".cache", ignore_errors=True)
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError) as err:
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        reason = "HF_HUB_OFFLINE is set" if offline else f"{type(err).__name__}"
        raise InputError(
            f"checkpoint {name!r} cannot be downloaded ({reason}): run `python -m nmtbench "
            f"snapshot {name}` where the Hugging Face hub is reachable and copy {out} here, "
            "or name a local directory holding it in config") from None
    return out
