"""fairseq --user-dir for benchmarks/parity: fairseq's CMLM with separate source and target
embeddings. `cmlm_transformer` ties them by default and offers no flag to untie them; the harness's
models have one vocabulary per side."""

from fairseq.models import register_model_architecture
from fairseq.models.nat.cmlm_transformer import cmlm_base_architecture


@register_model_architecture("cmlm_transformer", "cmlm_transformer_separate_vocab")
def cmlm_separate_vocab(args):
    args.share_all_embeddings = getattr(args, "share_all_embeddings", False)
    cmlm_base_architecture(args)
