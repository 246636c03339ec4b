"""torch.compile for training on a GPU. The model's own Transformer layers (every method's
encoder and decoder stacks are `EncoderLayer` / `DecoderLayer`s) and its label-smoothed loss run
as fused kernels: the residual adds, dropouts, LayerNorms and the casts bf16 autocast puts
between them stop being one launch and one trip through memory each. Pre-trained modules (the
Hugging Face BERTs) stay eager. Shapes are dynamic from the start, since token batches vary in
both dimensions: one compilation per layer type and mode (training, validation) per run.

On CPU training stays eager: the toy world's models are too small for compilation to pay, and
the suite checks exact resumption there."""

from __future__ import annotations

from nmtbench.methods.transformer import DecoderLayer, EncoderLayer
from nmtbench.models.contract import Model


def compile_for_training(model: Model) -> None:
    """Compile `model`'s own layers in place (names and weights unchanged) and its loss."""
    for module in model.modules():
        if isinstance(module, (EncoderLayer, DecoderLayer)):
            module.compile(dynamic=True)
    model.compiled = True
