"""A run's training and validation pairs, with what its run inputs change of them
(nmtbench.workflow.run_inputs): a teacher's translations as the targets, back-translated pairs
added, side data such as soft targets attached by line number."""

from __future__ import annotations

import logging
from functools import cached_property
from typing import Any

from nmtbench.parts.batches import Bitext, read_back_translations
from nmtbench.parts.contract import Model
from nmtbench.run_paths import RunPaths
from nmtbench.workflow.train_settings import TrainConfig

log = logging.getLogger(__name__)


class TrainingData:
    """The pairs a run trains and validates on. Read when first used, so that a run input
    replacing the targets is taken in before the corpus is encoded."""

    def __init__(self, paths: RunPaths, src_tok: Any, tgt_tok: Any, tc: TrainConfig,
                 model: Model):
        self.paths, self.src_tok, self.tgt_tok, self.tc, self.model = (
            paths, src_tok, tgt_tok, tc, model)
        self.train_tgt = paths.train_tgt

    @cached_property
    def train(self) -> Bitext:
        return Bitext.load(self.paths.train_src, self.train_tgt, self.src_tok, self.tgt_tok,
                           self.tc.max_positions, limit=self.tc.train_pairs,
                           src_bos=self.model.source_bos)

    @cached_property
    def valid(self) -> Bitext:
        return Bitext.load(self.paths.valid_src, self.paths.valid_tgt, self.src_tok,
                           self.tgt_tok, self.tc.max_positions, src_bos=self.model.source_bos)

    def replace_targets(self, path: str) -> None:
        """Train on `path`'s targets (a teacher's translations) instead of the corpus's."""
        assert "train" not in self.__dict__, "targets replaced after they were read"
        self.train_tgt = path

    def add_back_translations(self, src_path: str, tgt_path: str) -> None:
        """The first `bt_sentences` back-translated pairs, after the parallel ones."""
        src, tgt = read_back_translations(src_path, tgt_path, self.tc.bt_sentences)
        log.info("training on %d back-translated pairs besides the parallel data", len(src))
        self.train += Bitext.encode(src, tgt, self.src_tok, self.tgt_tok,
                                    self.tc.max_positions, src_path, self.model.source_bos)

    def attach_side_data(self, name: str, path: str) -> None:
        self.model.attach_side_data(name, path, self.train, self.tgt_tok)
