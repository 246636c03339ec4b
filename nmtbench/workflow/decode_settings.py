"""The decoding settings: their defaults, the tag that names them in file names, and the
command-line options that pass them to a job. Without torch: planning reads them.

Config `decode:` blocks, an experiment's `decode:` and the CLI's decode/latency options all
override these defaults; nothing else states them.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

BEAM_SEARCH = ("beam", "lenpen", "lenpen_form", "max_len_a", "max_len_b")
MASK_PREDICT = ("length_beam", "iterations", "lenpen", "lenpen_form")
# Beam-search settings named in a tag only when they differ from their default.
OPTIONAL_IN_TAG = ("max_len_a", "max_len_b")


@dataclass(frozen=True)
class DecodeSettings:
    """How a trained run is decoded: beam search (`decoding: at`) or mask-predict (`nat`)."""

    beam: int = 5
    lenpen: float = 1.0
    lenpen_form: str = "fairseq"  # or gnmt
    max_len_a: float = 1.2  # outputs at most max_len_a * source length + max_len_b tokens
    max_len_b: int = 10
    length_beam: int = 4  # mask-predict: target-length candidates
    iterations: int = 10  # mask-predict: at most this many
    checkpoint: str = "best"  # or last
    average_last: int = 0  # > 0: average the last k checkpoints of `average_of` instead
    average_of: str = "epochs"  # or updates: the trainer's keep_interval_updates checkpoints
    batch_size: int = 64  # sentences per batch (does not change the hypotheses)
    decoding: str = "at"  # as the experiment's method decodes (not a `decode:` key)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> DecodeSettings:
        return replace(cls(), **values)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def search(self, parallel: bool) -> dict[str, Any]:
        """The settings of one search: mask-predict's when `parallel`, else beam search's."""
        return {k: getattr(self, k) for k in (MASK_PREDICT if parallel else BEAM_SEARCH)}

    def record(self) -> dict[str, Any]:
        """What a decoding's record says of the settings that made its hypotheses (the report
        compares it with its cell's): the search's settings and the weights decoded."""
        return {"decoding": self.decoding, **self.search(parallel=self.decoding == "nat"),
                "checkpoint": self.weights}

    @property
    def weights(self) -> str:
        """The weights decoded: a checkpoint's name, or the average of the last k of a kind."""
        if not self.average_last:
            return self.checkpoint
        kind = "" if self.average_of == "epochs" else f"_{self.average_of}"
        return f"average_last_{self.average_last}{kind}"

    def refusal(self, target_vocab: int | None = None, max_length: int | None = None
                ) -> str | None:
        """Why these settings cannot decode sensibly, naming the decode key, or None. With the
        model's target vocabulary size and longest predicted length where known (in a job,
        or built from configs when the workflow starts): a beam wider than the vocabulary
        is memory no search needs, and mask-predict cuts its length candidates to the
        lengths the model predicts, so the tag would name a search that never ran."""
        if self.decoding == "at" and self.max_len_a == 0 and self.max_len_b == 0:
            return ("decode keys 'max_len_a' and 'max_len_b' are both 0: every hypothesis "
                    "would be empty")
        if self.decoding == "at" and target_vocab is not None and self.beam > target_vocab:
            return (f"decode key 'beam' {self.beam} is wider than the target vocabulary "
                    f"({target_vocab} tokens): every step would score beam x vocabulary = "
                    f"{self.beam * target_vocab:,} candidates per sentence")
        if self.decoding == "nat" and max_length is not None and self.length_beam > max_length:
            return (f"decode key 'length_beam' {self.length_beam} is more than the {max_length} "
                    "target lengths the model predicts")
        return None

    @property
    def tag(self) -> str:
        """A file-name-safe name for everything that changes the hypotheses: the settings of
        the search (beam search, or mask-predict for `decoding: nat`) and the checkpoint."""
        # epochs' averages keep the tags they had before update checkpoints existed
        ckpt = (self.checkpoint if not self.average_last else f"avg{self.average_last}"
                + ("u" if self.average_of == "updates" else ""))
        default = DecodeSettings()
        if self.decoding == "nat":  # the length penalty named only when not the average's
            ranked = ("" if (self.lenpen, self.lenpen_form) == (default.lenpen,
                                                                 default.lenpen_form)
                      else f"-lp{_number(self.lenpen)}-{self.lenpen_form}")
            return f"lb{self.length_beam}-it{self.iterations}{ranked}-{ckpt}"
        tag = f"beam{self.beam}-lp{_number(self.lenpen)}-{self.lenpen_form}-{ckpt}"
        for key in OPTIONAL_IN_TAG:
            if getattr(self, key) != getattr(default, key):
                tag += f"-{key.replace('_', '')}{_number(getattr(self, key))}"
        return tag

    def arguments(self) -> list[str]:
        """The decode/latency command's options for these settings (see `add_arguments`), one
        argument each (the rules quote them)."""
        return [arg for f in fields(self) if f.name in OPTIONS
                for arg in (f"--{f.name.replace('_', '-')}", str(getattr(self, f.name)))]


# No count or size is more than a C int holds (torch's thread count, the tokenizers' vocabulary
# size would overflow, past a Python error, in their own words)
MOST = 2 ** 31 - 1


def at_least(least: int, most: int = MOST) -> Callable[[str], int]:
    """An argparse type: an integer of at least `least` and at most `most` (counts and
    sizes; the CLI's too)."""
    def integer(text: str) -> int:
        value = int(text)
        if value < least:
            raise argparse.ArgumentTypeError(f"{value} is less than {least}")
        if value > most:
            raise argparse.ArgumentTypeError(f"{value} is more than {most}")
        return value
    return integer


def finite(least: float | None = None, most: float | None = None) -> Callable[[str], float]:
    """An argparse type: a finite number (float() reads "nan" and "inf" too), of at least
    `least` and at most `most` if given."""
    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not a finite number")
        if least is not None and value < least:
            raise argparse.ArgumentTypeError(f"{value} is less than {least}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"{value} is more than {most}")
        return value
    return number


MAX_LEN_A = 1000  # config/schema.yaml's maximum: a * source length must stay a finite length

# The command-line options of a decode or latency job: setting -> (type, choices, help); the
# types refuse what config/schema.yaml's $defs.decode refuses.
OPTIONS: dict[str, tuple[Callable[[str], Any], tuple[str, ...] | None, str | None]] = {
    "beam": (at_least(1), None, "beam search: beam width"),
    "lenpen": (finite(), None, None),
    "lenpen_form": (str, ("fairseq", "gnmt"), None),
    "max_len_a": (finite(0, MAX_LEN_A), None, None),
    "max_len_b": (at_least(0), None, None),
    "length_beam": (at_least(1), None, "mask-predict: target-length candidates"),
    "iterations": (at_least(1), None, "mask-predict: at most this many"),
    "checkpoint": (str, ("best", "last"), None),
    "average_last": (at_least(0), None, "average the last k checkpoints instead"),
    "average_of": (str, ("epochs", "updates"), "what --average-last averages"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--beam, --lenpen, ...: one option per entry of OPTIONS, defaulting to DecodeSettings'."""
    default = DecodeSettings()
    for name, (kind, choices, help_text) in OPTIONS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, choices=choices,
                            default=getattr(default, name), help=help_text)


def from_arguments(args: argparse.Namespace, **more: Any) -> DecodeSettings:
    """The settings the options of `add_arguments` (and `more`) give."""
    return DecodeSettings(**{name: getattr(args, name) for name in OPTIONS}, **more)


def _number(value: float) -> str:
    return f"{value:g}".replace(".", "p").replace("-", "m")
