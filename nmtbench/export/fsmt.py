"""Export a trained Transformer to the Hugging Face format (FSMT), weight for weight.

FSMT is Hugging Face's port of fairseq's `transformer` and the one class that represents ours
exactly: fairseq's sinusoid table (sines then cosines, frequencies 10000^(-i/(d/2-1))), post-norm
layers, ReLU, embeddings scaled by sqrt(d), separate source and target vocabularies, the output
layer tied to the target embeddings. Marian is not exact: it rebuilds its position table from
another formula on every load, and its decoder starts from a zero embedding in CTranslate2.

Two details are bridged rather than shared:
- positions: FSMT numbers them from pad + 1 (fairseq's convention), ours from 0, so the exported
  table holds our row i at FSMT's row pad + 1 + i. FSMT saves and loads that table with the
  weights (it would rebuild it only past its length, max_position_embeddings + pad + 1 rows, one
  more than our `max_positions`);
- the vocabularies: a Hugging Face tokenizer holds one, and ours are two WordPiece
  vocabularies. The export writes two stock tokenizers (hf_tokenizer.py): the source one at the
  directory's root, which `AutoTokenizer.from_pretrained(dir)` loads to encode, and the target
  one in `target_tokenizer/` (`subfolder="target_tokenizer"`) to decode, as FSMT's own tokenizer
  splits its two BPE vocabularies; nothing needs `trust_remote_code`.

Pre-norm models (Transformer-20) have no exact FSMT form and are refused with one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nmtbench.errors import InputError
from nmtbench.fileio import atomic_directory, write_json

EXPORTED = "nmtbench_export.json"  # what was exported: the run, its checkpoint or average

if TYPE_CHECKING:
    from transformers import FSMTForConditionalGeneration

    from nmtbench.methods.transformer import EncoderDecoder


def check_exportable(model: torch.nn.Module, where: str) -> EncoderDecoder:
    """The model, when it is a plain Transformer FSMT can hold; else one line saying why not."""
    from nmtbench.methods.transformer import (
        DecoderLayer,
        EncoderDecoder,
        EncoderLayer,
        TransformerDecoder,
        TransformerEncoder,
    )

    plain = (type(model) is EncoderDecoder and type(model.encoder) is TransformerEncoder
             and type(model.decoder) is TransformerDecoder and model.decoder.causal
             and model.encoder.embed_lengths is None
             and all(type(layer) is EncoderLayer for layer in model.encoder.layers)
             and all(type(layer) is DecoderLayer for layer in model.decoder.layers))
    if not plain:
        raise InputError(f"{where}: only the Transformer baseline exports to Hugging Face "
                         f"(this run's model is {type(model).__name__} with other parts)")
    if model.settings.pre_norm:
        raise InputError(f"{where}: a pre-norm Transformer has no exact FSMT form (FSMT is "
                         "post-norm only)")
    if model.src_vocab.pad != model.tgt_vocab.pad:
        raise InputError(f"{where}: FSMT needs one pad id on both sides, this run has "
                         f"{model.src_vocab.pad} (source) and {model.tgt_vocab.pad} (target)")
    return model


def _position_table(ours: torch.Tensor, pad: int) -> torch.Tensor:
    """FSMT's table (pad + 1 + P, D) holding our row i (of P) at row pad + 1 + i, zeros below."""
    table = torch.zeros(pad + 1 + ours.size(0), ours.size(1), dtype=ours.dtype)
    table[pad + 1:] = ours
    return table


def _layer_weights(prefix: str, layer: torch.nn.Module, cross: bool) -> dict[str, torch.Tensor]:
    attentions = [("self_attn", layer.self_attn, layer.self_attn_norm)]
    if cross:
        attentions.append(("encoder_attn", layer.cross_attn, layer.cross_attn_norm))
    weights: dict[str, torch.Tensor] = {}
    for name, attention, norm in attentions:
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            linear = getattr(attention, proj)
            weights[f"{prefix}.{name}.{proj}.weight"] = linear.weight
            weights[f"{prefix}.{name}.{proj}.bias"] = linear.bias
        weights[f"{prefix}.{name}_layer_norm.weight"] = norm.weight
        weights[f"{prefix}.{name}_layer_norm.bias"] = norm.bias
    for fc in ("fc1", "fc2"):
        weights[f"{prefix}.{fc}.weight"] = getattr(layer.ffn, fc).weight
        weights[f"{prefix}.{fc}.bias"] = getattr(layer.ffn, fc).bias
    weights[f"{prefix}.final_layer_norm.weight"] = layer.ffn_norm.weight
    weights[f"{prefix}.final_layer_norm.bias"] = layer.ffn_norm.bias
    return weights


def to_fsmt(model: EncoderDecoder, languages: tuple[str, str] = ("src", "tgt"),
            generation: dict[str, Any] | None = None,
            where: str | None = None) -> FSMTForConditionalGeneration:
    """An FSMT model computing what `model` computes (eval mode; dropout rates carried over);
    `where` names the model in the error when it has no FSMT form."""
    from transformers import FSMTConfig, FSMTForConditionalGeneration, GenerationConfig

    model = check_exportable(model, where or type(model).__name__)
    s, src, tgt = model.settings, model.src_vocab, model.tgt_vocab
    config = FSMTConfig(
        langs=list(languages), src_vocab_size=src.size, tgt_vocab_size=tgt.size,
        activation_function="relu", d_model=s.d_model, max_position_embeddings=s.max_positions,
        encoder_layers=s.encoder_layers, decoder_layers=s.decoder_layers,
        encoder_attention_heads=s.n_heads, decoder_attention_heads=s.n_heads,
        encoder_ffn_dim=s.ffn_dim, decoder_ffn_dim=s.ffn_dim, dropout=s.dropout,
        attention_dropout=s.attention_dropout, activation_dropout=s.activation_dropout,
        scale_embedding=True,
        # False: in transformers 5, True also ties the encoder's embeddings to the decoder's; the
        # output layer is written as a copy of the target embeddings instead
        tie_word_embeddings=False, pad_token_id=tgt.pad,
        bos_token_id=tgt.bos, eos_token_id=tgt.eos, decoder_start_token_id=tgt.bos)
    hf = FSMTForConditionalGeneration(config).eval()
    positions = model.encoder.embedder.positions
    weights = {
        "model.encoder.embed_tokens.weight": model.encoder.embed.weight,
        "model.decoder.embed_tokens.weight": model.decoder.embed.weight,
        "model.decoder.output_projection.weight": model.decoder.embed.weight,
        "model.encoder.embed_positions.weight": _position_table(positions, src.pad),
        "model.decoder.embed_positions.weight": _position_table(positions, tgt.pad),
    }
    for i, layer in enumerate(model.encoder.layers):
        weights.update(_layer_weights(f"model.encoder.layers.{i}", layer, cross=False))
    for i, layer in enumerate(model.decoder.layers):
        weights.update(_layer_weights(f"model.decoder.layers.{i}", layer, cross=True))
    missing, unexpected = hf.load_state_dict({k: v.detach().float() for k, v in weights.items()},
                                             strict=False)
    if missing or unexpected:  # a transformers version with other names: never half a model
        raise RuntimeError(f"FSMT's weights do not match: missing {missing}, "
                           f"unexpected {unexpected}")
    hf.generation_config = GenerationConfig(
        decoder_start_token_id=tgt.bos, bos_token_id=tgt.bos, eos_token_id=tgt.eos,
        pad_token_id=tgt.pad, suppress_tokens=[tgt.pad, tgt.bos], **(generation or {}))
    return hf


def export_run(run_dir: str | Path, out: str | Path, checkpoint: str = "best",
               average_last: int = 0, average_of: str = "epochs") -> Path:
    """Write a run's Transformer to `out` as a Hugging Face FSMT model and its source and
    target tokenizers (hf_tokenizer.py)."""
    from nmtbench.evaluation.translate import load_run_model
    from nmtbench.export.hf_tokenizer import save_tokenizers

    model, src_tok, tgt_tok, _ = load_run_model(run_dir, checkpoint, average_last, "cpu",
                                                average_of)
    hf = to_fsmt(model, where=str(run_dir))
    with atomic_directory(out, EXPORTED) as tmp:
        hf.save_pretrained(str(tmp))
        save_tokenizers(src_tok, tgt_tok, model.source_bos, tmp)
        write_json(tmp / EXPORTED, {"run_dir": str(run_dir), "checkpoint": checkpoint,
                                    "average_last": average_last, "average_of": average_of})
    return Path(out)


def to_ctranslate2(hf: FSMTForConditionalGeneration, src_tok: Any, tgt_tok: Any,
                   out: str | Path) -> Path:
    """Write an FSMT model (`to_fsmt`) as a CTranslate2 model directory.

    CTranslate2's converters have no FSMT loader; this is a converter on its spec API, and as
    FSMT's modules carry fairseq's names, CTranslate2's own fairseq setters fill the spec
    (position tables read from row pad + 1, as FSMT keeps them). Pad is named "<blank>", the
    name CTranslate2 gives padding. Sources are given as tokens, with their "[SEP]"."""
    from ctranslate2.converters import fairseq as setters
    from ctranslate2.converters.converter import Converter
    from ctranslate2.specs import common_spec, transformer_spec

    def vocabulary(tok: Any) -> list[str]:
        tokens = tok.convert_ids_to_tokens(list(range(len(tok))))
        return ["<blank>" if t == tok.pad_token else t for t in tokens]

    class FsmtConverter(Converter):
        def _load(self) -> transformer_spec.TransformerSpec:
            c = hf.config
            spec = transformer_spec.TransformerSpec.from_config(
                (c.encoder_layers, c.decoder_layers), c.encoder_attention_heads,
                pre_norm=False, activation=common_spec.Activation.RELU)
            encoder, decoder = hf.model.encoder, hf.model.decoder
            setters.set_input_layers(spec.encoder, encoder)
            for layer_spec, layer in zip(spec.encoder.layer, encoder.layers, strict=True):
                setters.set_transformer_encoder_layer(layer_spec, layer)
            setters.set_input_layers(spec.decoder, decoder)
            setters.set_linear(spec.decoder.projection, decoder.output_projection)
            for layer_spec, layer in zip(spec.decoder.layer, decoder.layers, strict=True):
                setters.set_transformer_decoder_layer(layer_spec, layer)
            spec.register_source_vocabulary(vocabulary(src_tok))
            spec.register_target_vocabulary(vocabulary(tgt_tok))
            spec.config.bos_token = spec.config.decoder_start_token = tgt_tok.cls_token
            spec.config.eos_token, spec.config.unk_token = tgt_tok.sep_token, tgt_tok.unk_token
            return spec

    with torch.no_grad():
        return Path(FsmtConverter().convert(str(out), force=True))
