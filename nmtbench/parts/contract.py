"""The method contract: the one surface the trainer, decoders, evaluator and reporter use.

Two halves, so that no class carries hooks it cannot honour:

- a `Method` (registered by name in `methods/`) is a recipe: its settings dataclass (the
  experiment-config keys it reads, mirrored in `config/schema.yaml`), the pre-trained
  checkpoint roles it loads, the decodings it accepts, and `build`, which composes a model;
- a `Model` is what `build` returns: an encoder and a decoder module joined by one of two
  shared classes, `nmtbench.methods.transformer.EncoderDecoder` (autoregressive: the
  `Autoregressive` hooks that `nmtbench.parts.beam_search.beam_search` drives) or
  `nmtbench.methods.cmlm.ConditionalMaskedLM` (parallel: the `NonAutoregressive` hooks of
  `nmtbench.parts.mask_predict`). A method that needs its own objective, optimiser groups or warm
  start subclasses one of them and overrides `losses`, `param_groups` or `warm_start`.

Per batch the trainer makes one forward (`losses`) and one backward, so data-parallel training
works for every method without it knowing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch
from torch import nn

from nmtbench.data.tokenization import Vocab
from nmtbench.errors import InputError
from nmtbench.workflow.method_registry import registered_methods
from nmtbench.workflow.schema import schema_dataclass


@dataclass
class Batch:
    """A padded batch. Target ids follow the BERT convention: BOS = [CLS], EOS = [SEP]."""

    src: torch.Tensor  # (B, S) source ids, right-padded with the pad id
    tgt_in: torch.Tensor  # (B, T) [CLS] y_1 .. y_n, padded
    tgt_out: torch.Tensor  # (B, T) y_1 .. y_n [SEP], padded
    ids: torch.Tensor  # (B,) each example's line number in its corpus (`Bitext.lines`)
    # per-example side data by name (e.g. a teacher's soft targets), batch dimension first
    extras: dict[str, torch.Tensor] = field(default_factory=dict)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device),
                     self.ids.to(device), {k: v.to(device) for k, v in self.extras.items()})


class Progress:
    """Where training is: `step` updates made, of `total` planned (max_updates, or max_epochs x
    the updates of one epoch). Reading `total` (or `fraction`) is noted (`read_total`): a run
    whose schedule read its length resumes only to the same length (`resume_refusal`)."""

    def __init__(self, step: int, total: int):
        self.step, self._total, self.read_total = step, total, False

    @property
    def total(self) -> int:
        self.read_total = True
        return self._total

    @property
    def fraction(self) -> float:
        return min(self.step / max(self.total, 1), 1.0)


def constant(_: Progress) -> float:
    return 1.0


@dataclass
class ParamGroup:
    """Parameters the optimiser updates together: the trainer's learning rate (warm-up and
    inverse square root) times `lr_scale(progress)` every update, and their own weight decay
    (None: the trainer's `weight_decay`)."""

    name: str
    params: list[nn.Parameter]
    lr_scale: Callable[[Progress], float] = constant
    weight_decay: float | None = None


def bert_decay_groups(params: Iterable[nn.Parameter]) -> list[ParamGroup]:
    """BERT's weight-decay split (Devlin et al.; the Hugging Face fine-tuning scripts): matrices
    decay at the trainer's rate, biases and LayerNorm gains (every 1-D parameter) not at all."""
    params = list(params)
    return [ParamGroup("matrices", [p for p in params if p.dim() > 1]),
            ParamGroup("biases and norms", [p for p in params if p.dim() <= 1], weight_decay=0.0)]


def adamw(groups: list[ParamGroup], weight_decay: float, **settings: Any) -> torch.optim.AdamW:
    """AdamW over `groups`, each at its own weight decay or else `weight_decay`: decoupled
    decay (Loshchilov & Hutter), as fairseq's Adam and BERT's optimiser apply it; with decay 0
    the same updates as torch's Adam. Parameters on a GPU get the fused kernel (one launch for
    all of them, the same arithmetic)."""
    on_gpu = all(p.is_cuda for g in groups for p in g.params)
    return torch.optim.AdamW(
        [{"params": g.params, "weight_decay": weight_decay if g.weight_decay is None
          else g.weight_decay} for g in groups], fused=on_gpu or None, **settings)


@dataclass
class Losses:
    """What one forward pass gives the trainer.

    `terms`: named losses, each summed over the batch; the trainer adds them up with the
    method's `loss_weights` (1 where a term has none), divides by `ntokens` (what the batch's
    loss is a mean over, so an update weights its batches by their share of tokens) and
    backpropagates once. `stats`: extra floats for the log, already per token.
    """

    terms: dict[str, torch.Tensor]
    ntokens: int | torch.Tensor  # a 0-d tensor where the model counts on the device
    stats: dict[str, float | torch.Tensor] = field(default_factory=dict)

    def total(self, weights: Mapping[str, float]) -> torch.Tensor:
        """The loss per token that training minimises."""
        weighted = sum(weights.get(name, 1.0) * term for name, term in self.terms.items())
        return weighted / self.ntokens

    def per_token(self) -> dict[str, float | torch.Tensor]:
        """Each term per token, and the stats: the training log's record of a batch. Values
        may stay tensors on the device; the trainer reads them all in one transfer per update
        (each read on its own would wait for the GPU mid-update)."""
        return {**{k: v.detach().double() / self.ntokens for k, v in self.terms.items()},
                **self.stats}


class MethodSettings:
    """Settings a method reads: the experiment-config keys of its entry in config/schema.yaml
    (`$defs.methods`), the one place they are declared. A method's settings class is made a
    dataclass of them by `method_settings`; a key it lacks is the trainer's, or an error."""

    method: ClassVar[str]  # its entry in the schema

    @classmethod
    def keys(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> MethodSettings:
        """The fields found in a resolved experiment config (other keys are ignored)."""
        return cls(**{k: cfg[k] for k in cls.keys() if k in cfg})


def method_settings(name: str) -> Callable[[type], type]:
    """A class decorator: the settings of the method registered as `name`, with the fields
    of its schema entry (`$defs.methods.<name>`)."""

    def declare(cls: type) -> type:
        cls.method = name
        return schema_dataclass("methods", name)(cls)

    return declare


@dataclass
class WarmStart:
    """What `Model.warm_start` loaded: the keys of the new model the state did not fill
    (they keep their initialisation), the state's keys the model has no place for, and the
    sides whose weights it took (src: encoder weights, tgt: decoder weights, whose
    embeddings that side's vocabulary indexes)."""

    missing: list[str]
    unexpected: list[str]
    sides: frozenset[str] = frozenset()


def mark_pretrained(module: nn.Module) -> nn.Module:
    """Mark a module as loaded from a pre-trained checkpoint: its frozen parameters are not
    saved in the run's checkpoints, they are reloaded from the checkpoint directory."""
    module.nmtbench_pretrained = True
    return module


class Model(nn.Module):
    """Base of every built model: what the trainer calls."""

    # how it decodes, in the config's words (`decoding`): "at" (beam search, Autoregressive),
    # "nat" (mask-predict, NonAutoregressive) or "none" (never decoded: a teacher)
    decoding: str
    source_bos: bool  # sources read as [CLS] x [SEP] (a BERT) or x [SEP] (fairseq)
    src_vocab: Vocab
    tgt_vocab: Vocab
    settings: MethodSettings
    compiled = False  # set by `compile_for_training`: the loss runs compiled too

    def compile_for_training(self, **options: Any) -> None:
        """torch.compile, in place, the modules whose class sets `compiled_in_training` (the
        Transformer layers every method's own encoder and decoder stacks are made of), and the
        loss (`compiled`): the residual adds, dropouts, LayerNorms and the casts bf16 autocast
        puts between them stop being one launch and one trip through memory each. Pre-trained
        modules (the Hugging Face BERTs) stay eager. Shapes are dynamic from the start, since
        token batches vary in both dimensions: one compilation per layer type and mode
        (training, validation) per run. Names and weights are unchanged. The trainer calls it
        on a GPU when the config's `compile` is true; CPU training stays eager. `options` go to
        torch.compile instead of the trainer's (benchmarks/gpu_host_overhead.py tries others)."""
        for module in self.modules():
            if getattr(type(module), "compiled_in_training", False):
                module.compile(**(options or {"dynamic": True}))
        self.compiled = True

    def param_groups(self) -> list[ParamGroup]:
        """The optimiser's groups; together they hold every trainable parameter once."""
        return [ParamGroup("all", list(self.trainable_parameters()))]

    def attach_side_data(self, name: str, path: str, data: Any, tokenizer: Any) -> None:
        """Attach the run input `name` at `path` (side data by line number, e.g. a teacher's
        soft targets) to the training pairs `data` (`Bitext.attach`), read in the
        target `tokenizer`'s ids. A model that takes none refuses it."""
        raise InputError(f"run input {name!r}: this model ({type(self).__name__}) takes no "
                         "side data")

    def write_soft_targets(self, tokenizers: tuple[Any, Any], cfg: Mapping[str, Any],
                           run_dir: str, train: tuple[str, str], valid: tuple[str, str],
                           out: str, top_k: int, info: str | None = None,
                           max_tokens: int = 4096) -> None:
        """Write this trained teacher's top-K distributions over the `train` pairs' target
        positions to `out` and a summary to `info` (the run input `soft_targets`,
        nmtbench.workflow.run_inputs.soft_targets); `tokenizers` (source, target) and `cfg`
        are its run's. A model that is no teacher refuses."""
        raise InputError(f"{run_dir}: not a teacher run ({type(self).__name__} gives no soft "
                         "targets)")

    def losses(self, batch: Batch, progress: Progress | None = None) -> Losses:
        """Named loss terms of one batch. A term meant to train only part of the model
        confines itself by detaching at the partition's boundary, e.g. a term that must not
        move the encoder reads `memory.detach()`:

            memory = self.encoder(batch.src)
            return Losses({"nmt": nll_sum(self.decoder(tgt, memory)),
                           "lm": nll_sum(self.lm_head(memory.detach()))}, ntokens)
        """
        raise NotImplementedError

    def loss(self, batch: Batch, progress: Progress | None = None) -> tuple[torch.Tensor,
                                                                              Losses]:
        """The weighted sum the trainer backpropagates, and the terms it is made of."""
        losses = self.losses(batch, progress)
        return losses.total(self.settings.loss_weights), losses

    def trainable_parameters(self) -> Iterator[nn.Parameter]:
        return (p for p in self.parameters() if p.requires_grad)

    def pretrained_keys(self) -> set[str]:
        """State keys of frozen parameters inside modules loaded from pre-trained checkpoints
        (`mark_pretrained`): rebuilt from the checkpoint directories, never saved."""
        keys = set()
        for prefix, module in self.named_modules():
            if getattr(module, "nmtbench_pretrained", False):
                # every name of a tied weight (a masked-LM head shares the word embeddings)
                keys |= {f"{prefix}.{name}" for name, p in
                         module.named_parameters(remove_duplicate=False) if not p.requires_grad}
        return keys

    def checkpoint_state(self) -> dict[str, torch.Tensor]:
        """What a run's checkpoint stores of the model: all but the frozen pre-trained
        weights (about 0.9 GB per file for AB-Net's two BERTs)."""
        skip = self.pretrained_keys()
        return {k: v for k, v in self.state_dict().items() if k not in skip}

    def load_checkpoint_state(self, state: Mapping[str, torch.Tensor], where: str) -> None:
        """Load a `checkpoint_state`; anything else missing or left over is an error."""
        result = self.load_state_dict(state, strict=False)
        missing = sorted(set(result.missing_keys) - self.pretrained_keys())
        if missing or result.unexpected_keys:
            raise InputError(f"{where}: does not fit the model (missing {missing[:3]}, "
                             f"unexpected {sorted(result.unexpected_keys)[:3]})")

    def warm_start(self, state: Mapping[str, torch.Tensor], name: str = "init_from",
                   take: str = "", into: str = "") -> WarmStart:
        """Initialise (the part under `into` of) the model from another run's weights (those
        under `take`, renamed): every key whose name and shape match is loaded; the others
        keep this model's initialisation. Frozen pre-trained weights come from their
        checkpoint and are not reported missing. `name`: the run input, for messages."""
        state = {into + key[len(take):]: value for key, value in state.items()
                 if key.startswith(take)}
        if not state:
            raise InputError(f"{name}: the checkpoint has no weights under {take!r}")
        own = self.state_dict()
        for key, value in state.items():
            if key in own and own[key].shape != value.shape:
                raise InputError(f"{name}: {key} has shape {tuple(value.shape)}, the model's "
                                 f"is {tuple(own[key].shape)}")
        if not state.keys() & own.keys():
            raise InputError(f"{name}: none of the checkpoint's {len(state)} weights under "
                             f"{take!r} is a weight of this model under {into!r} (a run of "
                             "another method or model part?)")
        result = self.load_state_dict(state, strict=False)
        loaded = state.keys() & own.keys()
        return WarmStart(sorted(k for k in set(result.missing_keys) - self.pretrained_keys()
                                if k.startswith(into)),
                         sorted(result.unexpected_keys),
                         frozenset(side for side, prefix in (("src", "encoder."),
                                                             ("tgt", "decoder."))
                                   if any(key.startswith(prefix) for key in loaded)))

    def num_params(self) -> dict[str, int]:
        total = sum(p.numel() for p in self.parameters())
        trained = sum(p.numel() for p in self.trainable_parameters())
        return {"total": total, "trained": trained}


@contextmanager
def evaluating(model: nn.Module) -> Iterator[None]:
    """The model in eval mode for the block, then as it was. A model already in eval mode is
    left alone: switching walks every module, a tenth of a one-sentence beam search."""
    if not model.training:
        yield
        return
    model.eval()
    try:
        yield
    finally:
        model.train()


def without_grad(device: torch.device):
    """Gradient-free mode for a search on `device`: inference_mode, unless autocast is on there.
    Autocast's cache of cast weights skips inference mode, so a bf16 search under
    inference_mode casts every weight again at every step; no_grad keeps the cache (batch-1
    beam 5 of Transformer-base on an H200: 152 -> 140 ms, results/gpu.md). Without autocast,
    inference_mode is the faster (5% of a CPU beam search)."""
    return torch.no_grad() if torch.is_autocast_enabled(device.type) else torch.inference_mode()


@runtime_checkable
class Autoregressive(Protocol):
    """Incremental decoding (beam search). The state is a flat dict of tensors whose first
    dimension is the batch, so `reorder_state` selects rows of each."""

    max_positions: int  # beam search caps the output length by it

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Encode source ids (B, S); the state holds everything decoding needs."""

    def decode_step(self, tokens: torch.Tensor, state: dict[str, Any]) -> torch.Tensor:
        """Feed the last generated token (B,); return next-token log-probs (B, V). Updates
        `state` in place (key/value caches)."""

    def reorder_state(self, state: dict[str, Any], index: torch.Tensor) -> dict[str, Any]:
        """Select/repeat batch rows of every tensor in the state."""


@runtime_checkable
class NonAutoregressive(Protocol):
    """Parallel decoding (mask-predict): `encode`'s state also holds "length_lprobs" (B, L),
    the log-probs of every target length."""

    max_length: int  # the longest target (tokens between BOS and EOS) the model predicts

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Encode source ids (B, S)."""

    def predict(self, tokens: torch.Tensor, state: dict[str, Any],
                positions: torch.Tensor | None = None) -> torch.Tensor:
        """Log-probs (B, T, V) at every position of a partly masked target (B, T); with
        `positions` (B, T) bool, those of the chosen positions only, (M, V) in row-major
        order (mask-predict reads only the positions it re-masked)."""

    def reorder_state(self, state: dict[str, Any], index: torch.Tensor) -> dict[str, Any]:
        """Select/repeat batch rows of every tensor in the state."""


class Method:
    """A recipe registered under a name in `methods/`: settings, checkpoint roles, decodings
    and how to build its model. Never instantiated."""

    settings: ClassVar[type[MethodSettings]] = MethodSettings
    # From its schema entry: the pre-trained checkpoint roles it loads (setting name -> the
    # side whose tokenizer it reads; `x-checkpoint-side`) and the values of the setting
    # `decoding` it accepts, its default first: at (beam search), nat (mask-predict); a method
    # without the setting decodes `at`
    checkpoint_roles: ClassVar[dict[str, str]] = {}
    decodings: ClassVar[tuple[str, ...]] = ("at",)
    # settings naming another run whose checkpoint the model loads (config/schema.yaml marks
    # them `x-parent-run`; the trainer gets each as the run input of the same name) -> (the
    # prefix of the parent's weights taken, the prefix they load under)
    parent_runs: ClassVar[dict[str, tuple[str, str]]] = {"init_from": ("", "")}
    # the model classes `build` joins its encoder and decoder with (EncoderDecoder,
    # ConditionalMaskedLM): a method that differs only in its objective, optimiser groups or
    # warm start subclasses an existing method and names a subclass of its model here
    autoregressive: ClassVar[type[Model]]
    parallel: ClassVar[type[Model]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "settings" in cls.__dict__:
            info = registered_methods()[cls.settings.method]
            cls.checkpoint_roles = dict(info.checkpoint_roles)
            cls.decodings = info.decodings

    @classmethod
    def build(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
              pretrained: Mapping[str, Any] | None = None, weights: bool = True) -> Model:
        """The model of a resolved experiment config and the two vocabularies.

        `pretrained` maps a checkpoint role (`src_bert`) to the directory holding it (or an
        architecture); a role missing there is taken from the config's checkpoint name.
        `weights=False` builds the pre-trained parts with random weights (counting
        parameters offline)."""
        raise NotImplementedError

    @classmethod
    def build_for_translation(cls, cfg: Mapping[str, Any], src_vocab: Vocab, tgt_vocab: Vocab,
                              pretrained: Mapping[str, Any] | None = None) -> Model:
        """The model a trained run's weights are loaded into to translate: `build`'s, less
        what only training reads (a frozen distillation teacher is in no checkpoint, and
        loading it would import and read a pre-trained model nothing translates with)."""
        return cls.build(cfg, src_vocab, tgt_vocab, pretrained)

    @classmethod
    def read_settings(cls, cfg: Mapping[str, Any]) -> Any:
        """The settings `build` reads from a resolved experiment config, their `decoding`
        one of the method's (`MethodInfo.decoding`: settings without it decode the default)."""
        settings = cls.settings.from_config(cfg)
        registered_methods()[cls.settings.method].decoding(
            {"decoding": getattr(settings, "decoding", cls.decodings[0])},
            f"{cfg.get('method', cls.__name__)}: key 'run")
        return settings
