"""The two tokenizers of a model `python -m nmtbench export` wrote, saved as stock ones.

nmtbench's models read the source in one WordPiece vocabulary and write the target in another;
a Hugging Face tokenizer holds one. The export saves each side as transformers' own
`PreTrainedTokenizerFast` (named `TokenizersBackend` in transformers 5: a `tokenizer.json`
loaded as it is), so both load with `AutoTokenizer` and no `trust_remote_code`:

- the source side at the export's root: `AutoTokenizer.from_pretrained(dir)` encodes sentences
  as the model reads them, `x [SEP]` (or `[CLS] x [SEP]` for a model trained with a source BOS:
  `source_bos`), the template saved as the tokenizer's post-processor, and gives `input_ids`
  and `attention_mask` alone (no BERT segment ids, which FSMT does not take);
- the target side in `target_tokenizer/`:
  `AutoTokenizer.from_pretrained(dir, subfolder="target_tokenizer")` decodes what the model
  writes as nmtbench does (`nmtbench.data.tokenization.decode`): WordPiece continuations
  joined, other pieces one space apart, spaces before punctuation kept (the saved BERT decoder's
  clean-up is turned off).

Not BERT's own class: transformers 5's `BertTokenizer` rebuilds its pipeline from its vocabulary
on loading, dropping a saved post-processor, decoder or pre-tokenizer. transformers 5 has no
translation pipeline either; source tokenizer + `generate` + target tokenizer do its job
(docs/performance.md shows it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders
from tokenizers.processors import TemplateProcessing
from transformers import PreTrainedTokenizerFast

TARGET = "target_tokenizer"  # the target side's subfolder of an export
MODEL_INPUTS = ["input_ids", "attention_mask"]


def save_tokenizers(source: Any, target: Any, source_bos: bool, out: str | Path) -> None:
    """Save a run's source tokenizer at `out` and its target tokenizer in `out`/TARGET, as
    stock tokenizers that encode and decode as the run does."""
    encoder = Tokenizer.from_str(source.backend_tokenizer.to_str())
    if not source_bos:  # `x [SEP]`, as fairseq's Transformer reads `x </s>`
        sep = (source.sep_token, source.sep_token_id)
        encoder.post_processor = TemplateProcessing(
            single=f"$A {sep[0]}", pair=f"$A {sep[0]} $B:1 {sep[0]}:1", special_tokens=[sep])
    decoder = Tokenizer.from_str(target.backend_tokenizer.to_str())
    if isinstance(decoder.decoder, decoders.WordPiece):
        decoder.decoder = decoders.WordPiece(prefix=decoder.decoder.prefix, cleanup=False)
    _stock(encoder, source).save_pretrained(str(out))
    _stock(decoder, target).save_pretrained(str(Path(out) / TARGET))


def _stock(backend: Tokenizer, like: Any) -> PreTrainedTokenizerFast:
    """`backend` as a stock tokenizer with the special tokens of `like`."""
    return PreTrainedTokenizerFast(tokenizer_object=backend, model_input_names=MODEL_INPUTS,
                                   clean_up_tokenization_spaces=False,
                                   **like.special_tokens_map)
