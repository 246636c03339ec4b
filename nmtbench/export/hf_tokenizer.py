"""One tokenizer over two vocabularies, for a model `python -m nmtbench export` wrote.

A Hugging Face `pipeline("translation")` encodes its input and decodes the model's output with one
tokenizer; nmtbench's models read the source in one WordPiece vocabulary and write the target in
another. `SourceTargetTokenizer` is the source tokenizer (its own class, so everything a pipeline
asks of a tokenizer works) whose decoding reads target ids: the split FSMT's own tokenizer makes
between its two BPE vocabularies. The export copies this file next to the model, so it loads with
`AutoTokenizer.from_pretrained(dir, trust_remote_code=True)`; it needs nothing from nmtbench.

Layout of the directory: `source_tokenizer/` and `target_tokenizer/` (each a saved tokenizer),
`tokenizer_config.json` (`source_bos`: whether sources read `[CLS] x [SEP]` or `x [SEP]`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tokenizers.processors import TemplateProcessing
from transformers import AutoTokenizer, BertTokenizer

CONFIG = "tokenizer_config.json"


class SourceTargetTokenizer(BertTokenizer):
    """Encodes with the source vocabulary, decodes with the target one."""

    target: Any = None
    source_bos: bool = False

    @classmethod
    def from_pretrained(cls, path: str | Path, *args: Any, **kwargs: Any) -> SourceTargetTokenizer:
        path = Path(path)
        if not path.is_dir():  # a hub repository: fetch it whole
            from huggingface_hub import snapshot_download

            path = Path(snapshot_download(str(path)))
        config = json.loads((path / CONFIG).read_text())
        tokenizer = super().from_pretrained(str(path / "source_tokenizer"))
        tokenizer.attach(AutoTokenizer.from_pretrained(str(path / "target_tokenizer")),
                         bool(config.get("source_bos", False)))
        return tokenizer

    @classmethod
    def from_pair(cls, source_dir: str | Path, target: Any, source_bos: bool,
                  ) -> SourceTargetTokenizer:
        tokenizer = super().from_pretrained(str(source_dir))
        tokenizer.attach(target, source_bos)
        return tokenizer

    def attach(self, target: Any, source_bos: bool) -> None:
        """Decode with `target`; read sources as `[CLS] x [SEP]` or, without BOS, `x [SEP]`."""
        self.target, self.source_bos = target, source_bos
        self.model_input_names = ["input_ids", "attention_mask"]  # no BERT segment ids
        if not source_bos:
            sep = (self.sep_token, self.sep_token_id)
            self.backend_tokenizer.post_processor = TemplateProcessing(
                single=f"$A {sep[0]}", pair=f"$A {sep[0]} $B:1 {sep[0]}:1", special_tokens=[sep])

    def decode(self, token_ids: Any, skip_special_tokens: bool = False,
               **kwargs: Any) -> str:
        """Target ids -> words: WordPiece continuations joined, tokens separated by a space
        (the word-level text nmtbench scores)."""
        if hasattr(token_ids, "tolist"):
            token_ids = token_ids.tolist()
        if token_ids and isinstance(token_ids[0], list):
            return [self.decode(ids, skip_special_tokens, **kwargs) for ids in token_ids]
        special = set(self.target.all_special_ids) if skip_special_tokens else set()
        tokens = self.target.convert_ids_to_tokens([i for i in token_ids if i not in special])
        return " ".join(tokens).replace(" ##", "")

    def batch_decode(self, sequences: Any, skip_special_tokens: bool = False,
                     **kwargs: Any) -> list[str]:
        return [self.decode(ids, skip_special_tokens, **kwargs) for ids in sequences]

    def save_pretrained(self, save_directory: str | Path, *args: Any, **kwargs: Any) -> tuple:
        out = Path(save_directory)
        out.mkdir(parents=True, exist_ok=True)
        source = BertTokenizer.from_pretrained(self.name_or_path)  # without our post-processor
        source.save_pretrained(str(out / "source_tokenizer"))
        self.target.save_pretrained(str(out / "target_tokenizer"))
        module = Path(__file__)
        shutil.copyfile(module, out / "tokenizer_nmtbench.py")
        (out / CONFIG).write_text(json.dumps({
            "tokenizer_class": "SourceTargetTokenizer",
            "auto_map": {"AutoTokenizer": ["tokenizer_nmtbench.SourceTargetTokenizer", None]},
            "source_bos": self.source_bos}, indent=2) + "\n")
        return (str(out / CONFIG),)
