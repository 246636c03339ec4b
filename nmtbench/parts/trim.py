"""A pre-trained checkpoint's vocabulary trimmed to the pieces a dataset uses.

mBERT's 119,547 WordPieces cover a hundred languages; a model that reads one language pair
carries some 90M embedding parameters for pieces it never sees. Deep fusion (Weng et al. 2022)
counts 171M parameters for mBERT plus its decoder, which only a trimmed vocabulary explains
(mBERT alone is 178M; docs/papers/deepfusion2022.md). The trimmed checkpoint keeps the special
tokens and the `size` pieces most frequent in the training corpora, read by the checkpoint's
own tokenizer both as a source and as a target reads them (targets keep punctuation inside a
word as continuation pieces: nmtbench.data.tokenization), in their original order; their
embedding rows and masked-LM output biases are copied, the rest dropped. A corpus word whose
pieces are all kept tokenizes exactly as before (WordPiece's longest match can only pick a kept
piece it picked before); one that needed a dropped piece falls back to shorter pieces or
[UNK], which the summary counts.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from nmtbench import layout
from nmtbench.data.tokenization import load_tokenizer
from nmtbench.errors import InputError
from nmtbench.fileio import atomic_directory, read_lines, write_json
from nmtbench.parts.pretrained import load_model

SUMMARY = layout.TRIM_SUMMARY_NAME
CHUNK = 10_000  # lines tokenized per call


def piece_counts(tokenizer: Any, corpora: Iterable[str | Path]) -> Counter[int]:
    """How often each piece id occurs in the corpora, as the tokenizer reads them."""
    counts: Counter[int] = Counter()
    for path in corpora:
        lines = read_lines(path)
        for start in tqdm(range(0, len(lines), CHUNK), desc=f"counting {Path(path).name}",
                          unit="chunk", disable=None, mininterval=5):
            for ids in tokenizer(lines[start:start + CHUNK], add_special_tokens=False,
                                 truncation=False)["input_ids"]:
                counts.update(ids)
    return counts


def kept_ids(counts: Counter[int], specials: Iterable[int], size: int) -> list[int]:
    """The special ids and the most frequent others (ties: the lower id), `size` in all at
    most, in their original order."""
    specials = set(specials)
    if size <= len(specials):
        raise InputError(f"trimmed vocabulary size {size} leaves no room beside the "
                         f"{len(specials)} special tokens")
    ranked = sorted((i for i in counts if i not in specials), key=lambda i: (-counts[i], i))
    return sorted(specials | set(ranked[:size - len(specials)]))


def tokenizer_settings(tokenizer: Any, checkpoint: str | Path) -> dict[str, Any]:
    """The settings (case, accents, Chinese characters) a WordPiece vocabulary is read with:
    the checkpoint's tokenizer_config.json without its full vocabulary's file, else (a
    checkpoint with tokenizer.json alone) what its fast tokenizer's normaliser does."""
    config_file = Path(checkpoint) / "tokenizer_config.json"
    if config_file.is_file():
        settings = json.loads(config_file.read_text(encoding="utf-8"))
        settings.pop("tokenizer_file", None)
        return settings
    normalizer = json.loads(tokenizer.backend_tokenizer.to_str()).get("normalizer") or {}
    if normalizer.get("type") != "BertNormalizer":
        raise InputError(f"checkpoint {str(checkpoint)!r}: no tokenizer_config.json, and its "
                         "tokenizer.json does not say how a WordPiece vocabulary reads text")
    return {"tokenizer_class": "BertTokenizer", "do_lower_case": normalizer["lowercase"],
            "strip_accents": normalizer["strip_accents"],
            "tokenize_chinese_chars": normalizer["handle_chinese_chars"]}


def trim_checkpoint(checkpoint: str | Path, corpora: list[str | Path], size: int,
                    out: str | Path) -> dict[str, Any]:
    """Write `checkpoint` (a BERT directory with its tokenizer) with its vocabulary trimmed to
    `size` pieces of `corpora` at `out`, atomically; returns the summary also saved there."""
    tokenizer = load_tokenizer(checkpoint)
    if getattr(tokenizer, "vocab", None) is None or tokenizer.cls_token is None:
        raise InputError(f"checkpoint {str(checkpoint)!r}: only a WordPiece (BERT) vocabulary "
                         "can be trimmed")
    counts = (piece_counts(tokenizer, corpora)
              + piece_counts(load_tokenizer(checkpoint, target=True), corpora))
    if not counts:
        raise InputError(f"{', '.join(map(str, corpora))}: no text to count pieces in (a "
                         "vocabulary trimmed to it would hold the special tokens alone)")
    keep = kept_ids(counts, tokenizer.all_special_ids, size)
    total = sum(counts.values())
    kept = sum(counts[i] for i in keep)
    model = load_model(checkpoint, masked_lm=True)
    if model.get_input_embeddings().num_embeddings != len(tokenizer):
        raise InputError(f"checkpoint {str(checkpoint)!r}: its embeddings have "
                         f"{model.get_input_embeddings().num_embeddings} rows for "
                         f"{len(tokenizer)} tokens")
    index = torch.tensor(keep)
    new_id = {old: new for new, old in enumerate(keep)}
    with torch.no_grad():
        embed = model.get_input_embeddings()
        trimmed = torch.nn.Embedding(len(keep), embed.embedding_dim,
                                     padding_idx=new_id.get(tokenizer.pad_token_id))
        trimmed.weight.copy_(embed.weight[index])
        model.set_input_embeddings(trimmed)
        head = model.get_output_embeddings()
        head.weight = trimmed.weight  # BERT ties its masked-LM output layer to the embeddings
        if head.bias is not None:
            head.bias = torch.nn.Parameter(head.bias[index].clone())
            model.cls.predictions.bias = head.bias
        head.out_features = len(keep)
    model.config.vocab_size = len(keep)
    model.config.pad_token_id = new_id.get(tokenizer.pad_token_id)
    tokens = tokenizer.convert_ids_to_tokens(keep)
    summary = {"checkpoint": str(checkpoint), "size": len(keep), "original_size": len(tokenizer),
               "corpus_pieces": total, "pieces_used": len(counts),
               "corpus_coverage": kept / total if total else 1.0}
    with atomic_directory(out, SUMMARY) as tmp:
        if (Path(checkpoint) / "special_tokens_map.json").is_file():
            shutil.copy(Path(checkpoint) / "special_tokens_map.json", tmp)
        write_json(tmp / "tokenizer_config.json", tokenizer_settings(tokenizer, checkpoint))
        (tmp / "vocab.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
        try:  # from vocab.txt with the original's settings
            rebuilt = load_tokenizer(tmp)
        except InputError as err:
            raise InputError(f"checkpoint {str(checkpoint)!r}: its tokenizer does not rebuild "
                             f"from the trimmed vocabulary ({err})") from None
        if rebuilt.convert_tokens_to_ids(tokens) != list(range(len(keep))):
            raise InputError(f"checkpoint {str(checkpoint)!r}: the trimmed vocabulary does not "
                             "reload in its order (duplicate pieces?)")
        rebuilt.save_pretrained(str(tmp))
        model.save_pretrained(str(tmp))
        write_json(tmp / SUMMARY, summary)
    return summary
