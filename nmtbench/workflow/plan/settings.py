"""Each experiment's settings on a dataset: defaults, the dataset's checkpoints (else the BERTs
pre-trained on it), the experiment's own, the dataset's overrides; its vocabularies,
checkpoints and decoding."""

from __future__ import annotations

import math
from typing import Any

from nmtbench.errors import InputError
from nmtbench.workflow.decode_settings import DecodeSettings
from nmtbench.workflow.plan.cells import NOT_TRAINING
from nmtbench.workflow.train_settings import TrainConfig

# An update's size as a paper gives it -> the batch setting whose multiple it is: the plan turns
# it into `update_freq` for the train rule's GPUs, so the trainer never sees it
PER_UPDATE = {"tokens_per_update": "max_tokens", "sentences_per_update": "max_sentences"}


class ExperimentSettings:
    """A part of `Plan`: an experiment's resolved settings."""

    def overrides(self, dataset: str, experiment: str) -> dict[str, Any]:
        """The dataset's overrides for the experiment: those for its method, then those for
        the experiment by name (`decode` merged key by key)."""
        table = self.config["datasets"][dataset].get("overrides", {})
        method, named = table.get(self.experiments[experiment]["method"], {}), \
            table.get(experiment, {})
        decode = {**method.get("decode", {}), **named.get("decode", {})}
        return {**method, **named, **({"decode": decode} if decode else {})}

    def checkpoint_roles(self, experiment: str) -> dict[str, str]:
        """The settings of the experiment's method naming a pre-trained checkpoint (`src_bert`)
        -> the side whose dataset checkpoint fills them."""
        info = self.implemented.get(self.experiments[experiment]["method"])
        return info.checkpoint_roles if info is not None else {}

    def side_checkpoint(self, dataset: str, side: str) -> str | None:
        """What fills a checkpoint role of `side` (src, tgt, joint) that nothing names: the
        dataset's `checkpoints.<side>`, else the one BERT pre-trained in the DAG on that side
        of it (the toy world's toy-bert-src, toy-bert-tgt, toy-bert-joint), else None."""
        named = self.config["datasets"][dataset].get("checkpoints", {})
        if side in named:
            return named[side]
        berts = self.side_berts(dataset, side)
        return berts[0] if len(berts) == 1 else None

    def side_berts(self, dataset: str, side: str) -> list[str]:
        """The `pretraining` entries of model bert on `side` of the dataset (a reversed
        dataset's: its original's, sides swapped)."""
        spec = self.config["datasets"][dataset]
        if spec["kind"] == "reversed":
            dataset, side = spec["of"], {"src": "tgt", "tgt": "src"}.get(side, side)
        return [name for name, entry in self.config.get("pretraining", {}).items()
                if (entry["model"], entry["dataset"], entry["side"]) == ("bert", dataset, side)]

    def train_settings(self, dataset: str, experiment: str, seed: int | None = None,
                       with_overrides: bool = True) -> dict[str, Any]:
        """defaults <- the dataset's checkpoints <- experiment <- the dataset's overrides for
        its method and for it (<- seed). A checkpoint role of the method (`src_bert`,
        `tgt_bert`) that the experiment leaves open is filled with its side's checkpoint
        (`side_checkpoint`: the dataset's, else the BERT pre-trained on that side)."""
        spec = self.experiments[experiment]
        settings = dict(self.config["defaults"])
        roles = self.checkpoint_roles(experiment)
        filled = {role: self.side_checkpoint(dataset, side) for role, side in roles.items()}
        settings.update({role: name for role, name in filled.items() if name is not None})
        settings.update({k: v for k, v in spec.items() if k not in NOT_TRAINING})
        if with_overrides:  # `decode` is decode_settings' part
            settings.update({k: v for k, v in self.overrides(dataset, experiment).items()
                             if k not in NOT_TRAINING})
            settings.update(self._mapped_size(dataset, experiment, settings))
            # an experiment's `tgt_bert: null` means no such checkpoint: nothing fills it
            settings.update({role: None for role in roles if role in spec and spec[role] is None})
        wanted = {key: settings.pop(key) for key in PER_UPDATE if settings.get(key)}
        if len(wanted) > 1:
            raise InputError(f"{experiment} on {dataset}: tokens_per_update and "
                             "sentences_per_update are both set; an update is sized by one")
        for key, count in wanted.items():
            if not settings.get(PER_UPDATE[key]):  # max_sentences 0: no batch to multiply
                raise InputError(f"{experiment} on {dataset}: {key} {count} needs "
                                 f"{PER_UPDATE[key]} above 0, the batch it accumulates")
            settings["update_freq"] = self.update_freq(settings, key, count)
        if seed is not None:
            settings["seed"] = seed
        return settings

    def update_freq(self, settings: dict[str, Any], key: str, count: int) -> int:
        """The batches each process accumulates so that an update holds `count` tokens
        (`key` tokens_per_update) or sentences (sentences_per_update), at least, on the train
        rule's GPUs (`resources.train.gpu`, one process each): a paper's batch kept on fewer
        GPUs than it had, as fairseq's --update-freq keeps it."""
        gpus = max(1, int(self.config["resources"]["train"]["gpu"]))
        per_batch = getattr(TrainConfig.from_dict(settings), PER_UPDATE[key]) * gpus
        return max(1, math.ceil(count / per_batch))

    def _mapped_size(self, dataset: str, experiment: str,
                     settings: dict[str, Any]) -> dict[str, str]:
        """The dataset's `sizes` counterpart of the experiment's model size (`base` when it
        names none), for a method with sizes: the toy world's sizes keep the papers' order."""
        sizes = self.config["datasets"][dataset].get("sizes", {})
        info = self.implemented.get(self.experiments[experiment]["method"])
        if not sizes or info is None or "size" not in info.keys:
            return {}
        size = settings.get("size", "base")
        return {"size": sizes[size]} if size in sizes else {}

    def run_settings(self, dataset: str, run: str, seed: int) -> dict[str, Any]:
        """What the run `run` trains with: its settings, logging valid BLEU when the config
        asks for it everywhere or a curve figure of any paper draws an experiment it trains
        (fixed by the catalogue, so asking for another table never retrains a run), unless
        it is never decoded (a teacher: its training would stop at its first validation)."""
        settings = self.train_settings(dataset, run, seed)
        drawn = {e for f in self.catalogue.figures.values() if f.kind == "curve"
                 for e in f.experiments()}
        settings["valid_bleu"] = self.decoding(dataset, run) != "none" and (
            bool(settings.get("valid_bleu")) or any(e in drawn
                                                    for e in self.sharing(dataset, run)))
        return settings

    def vocabulary(self, dataset: str, experiment: str, side: str) -> tuple[str | None, str]:
        """Where the experiment's vocabulary of `side` (src, tgt) comes from: (a checkpoint
        whose WordPiece it reads, or None for the dataset's trained one; the tokenizer's
        side: src, tgt or joint). A checkpoint the method loads reads its side in its own
        vocabulary; `vocabulary: joint` reads both sides in the dataset's joint one (its
        `checkpoints.joint`, else trained on both sides), `vocabulary: NAME` in the
        checkpoint NAME's (a BERT-KD student in its teacher's)."""
        settings = self.train_settings(dataset, experiment)
        chosen = settings.get("vocabulary", "sides")
        if chosen not in ("sides", "joint"):
            return chosen, "joint"
        for role, role_side in self.checkpoint_roles(experiment).items():
            if settings.get(role) and role_side in (side, "joint"):
                return settings[role], role_side
        dataset_side = "joint" if chosen == "joint" else side
        return (self.config["datasets"][dataset].get("checkpoints", {}).get(dataset_side),
                dataset_side)

    def checkpoints(self, dataset: str, run: str) -> dict[str, str]:
        """The pre-trained checkpoints a run loads: role (`src_bert`) -> name."""
        settings = self.train_settings(dataset, run)
        return {role: settings[role] for role in self.checkpoint_roles(run) if settings.get(role)}

    def decode_settings(self, dataset: str, experiment: str) -> DecodeSettings:
        """The config's `decode`, then the experiment's, then the dataset's overrides'."""
        spec = self.experiments[experiment]
        return DecodeSettings.from_dict({
            **self.config.get("decode", {}), **spec.get("decode", {}),
            **self.overrides(dataset, experiment).get("decode", {}),
            "decoding": self.decoding(dataset, experiment)})

    def decoding(self, dataset: str, experiment: str) -> str:
        """`nat` (mask-predict) or `at` (beam search), as the experiment trains its model
        (unset: its method's first decoding)."""
        info = self.implemented.get(self.experiments[experiment]["method"])
        default = info.decodings[0] if info is not None else "at"
        return self.train_settings(dataset, experiment).get("decoding", default)
