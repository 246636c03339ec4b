"""Run with fairseq's Python: given fairseq's trained weights, does the harness's beam search
find fairseq's translations? Prints a JSON summary.

    .venv-fairseq/bin/python benchmarks/parity/check_search.py DATA_BIN CHECKPOINT BEAM LENPEN \
        MAX_LEN_A MAX_LEN_B

The checkpoint's weights are copied into the harness's Transformer built in fairseq's layout
(check_equivalence.py); each test batch is then translated by fairseq's SequenceGenerator and
by `nmtbench.parts.beam_search`, and the two outputs compared token for token. A BLEU gap
between the systems' own runs that this check does not show comes from training, not search.
"""

import json
import sys
from pathlib import Path

import torch
from fairseq import checkpoint_utils

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_equivalence import fairseq_names  # noqa: E402

from nmtbench.data.tokenization import Vocab  # noqa: E402
from nmtbench.methods.transformer import Transformer, TransformerSettings, sinusoids  # noqa: E402
from nmtbench.parts.beam_search import beam_search  # noqa: E402


def main() -> None:
    data_bin, checkpoint = sys.argv[1], sys.argv[2]
    beam, lenpen = int(sys.argv[3]), float(sys.argv[4])
    max_len_a, max_len_b = float(sys.argv[5]), int(sys.argv[6])
    models, args, task = checkpoint_utils.load_model_ensemble_and_task(
        [checkpoint], arg_overrides={"data": data_bin})
    theirs = models[0].eval()
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    model_args = args.model
    settings = {"size": "tiny", "d_model": model_args.encoder_embed_dim,
                "ffn_dim": model_args.encoder_ffn_embed_dim,
                "n_heads": model_args.encoder_attention_heads,
                "encoder_layers": model_args.encoder_layers,
                "decoder_layers": model_args.decoder_layers, "dropout": 0.0}
    cfg = TransformerSettings.from_config(settings).architecture

    def vocab(d):  # fairseq's layout: the decoder starts from </s>
        return Vocab(size=len(d), pad=d.pad(), bos=d.eos(), eos=d.eos(), unk=d.unk(),
                     mask=d.unk())

    ours = Transformer.build(settings, vocab(src_dict), vocab(tgt_dict))
    first = src_dict.pad() + 1  # fairseq's first position
    for side in (ours.encoder, ours.decoder):
        side.embedder.positions = sinusoids(cfg.max_positions + first, cfg.d_model)[first:]
    names = fairseq_names(cfg)
    weights = theirs.state_dict()
    copied = {}
    for key in ours.state_dict():
        prefix = next(p for p in names if key.startswith(p))
        copied[key] = weights[names[prefix] + key[len(prefix):]]
    ours.load_state_dict(copied)
    ours.eval()

    args.generation.beam, args.generation.lenpen = beam, lenpen
    args.generation.max_len_a, args.generation.max_len_b = max_len_a, max_len_b
    generator = task.build_generator([theirs], args.generation)
    task.load_dataset("test")
    batches = task.get_batch_iterator(task.dataset("test"), max_sentences=64).next_epoch_itr(
        shuffle=False)
    pad, same, total, lengths = src_dict.pad(), 0, 0, [0, 0]
    with torch.no_grad():
        for sample in batches:
            their_hyps = task.inference_step(generator, [theirs], sample)
            rows = sample["net_input"]["src_tokens"]
            kept = [r[r != pad].tolist() for r in rows]
            width = max(map(len, kept))
            src = torch.tensor([r + [pad] * (width - len(r)) for r in kept])
            our_hyps = beam_search(ours, src, vocab=vocab(tgt_dict), beam=beam,
                                   max_len_a=max_len_a, max_len_b=max_len_b, lenpen=lenpen)
            for hyp, mine in zip(their_hyps, our_hyps, strict=True):
                fairseq_tokens = hyp[0]["tokens"].tolist()[:-1]  # without </s>
                same += fairseq_tokens == mine
                total += 1
                lengths[0] += len(fairseq_tokens)
                lengths[1] += len(mine)
    print(json.dumps({"sentences": total, "identical": same, "tokens_fairseq": lengths[0],
                      "tokens_harness": lengths[1]}))


if __name__ == "__main__":
    main()
