"""Run with fairseq's Python: given the same weights and batches, does the harness's Transformer
compute fairseq's loss and take fairseq's updates? Prints a JSON summary.

    .venv-fairseq/bin/python benchmarks/parity/check_equivalence.py DATA_BIN UPDATES FLAGS...

FLAGS are fairseq-train's (run.py passes the default's, dropout 0 so that no random stream
differs). The harness model is built in fairseq's layout, which is the only way the two can
hold the same weights: fairseq's decoder starts from </s> (the harness's from [CLS], a row of
its own) and counts positions from pad + 1 (the harness from 0). fairseq's weights are copied
from the harness model; both then train on fairseq's own batches, each with its own optimizer
(fairseq's Adam, torch's Adam), gradient clipping and the inverse-sqrt warm-up rates.
"""

import json
import sys
from pathlib import Path

import torch
from fairseq import options, tasks
from fairseq import utils as fairseq_utils
from fairseq.optim.adam import Adam as FairseqAdam

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from nmtbench.data.tokenization import Vocab  # noqa: E402
from nmtbench.methods.transformer import Transformer, TransformerSettings, sinusoids  # noqa: E402
from nmtbench.parts.contract import Batch  # noqa: E402


def fairseq_names(cfg) -> dict[str, str]:
    """Harness parameter-name prefixes -> fairseq's."""
    names = {"encoder.embed.": "encoder.embed_tokens.", "decoder.embed.": "decoder.embed_tokens."}
    parts = {"self_attn": "self_attn", "self_attn_norm": "self_attn_layer_norm",
             "ffn.fc1": "fc1", "ffn.fc2": "fc2", "ffn_norm": "final_layer_norm",
             "cross_attn": "encoder_attn", "cross_attn_norm": "encoder_attn_layer_norm"}
    for side, layers in (("encoder", cfg.encoder_layers), ("decoder", cfg.decoder_layers)):
        for i in range(layers):
            for ours, theirs in parts.items():
                names[f"{side}.layers.{i}.{ours}."] = f"{side}.layers.{i}.{theirs}."
    return names


def main() -> None:
    data_bin, updates, flags = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    args = options.parse_args_and_arch(options.get_training_parser(),
                                       input_args=[data_bin, *flags])
    task = tasks.setup_task(args)
    theirs, criterion = task.build_model(args), task.build_criterion(args)
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary

    settings = {"size": "tiny", "d_model": args.encoder_embed_dim,
                "ffn_dim": args.encoder_ffn_embed_dim, "n_heads": args.encoder_attention_heads,
                "encoder_layers": args.encoder_layers, "decoder_layers": args.decoder_layers,
                "dropout": args.dropout}
    cfg = TransformerSettings.from_config(settings).architecture

    def vocab(d):  # fairseq's layout: the decoder starts from </s>
        return Vocab(size=len(d), pad=d.pad(), bos=d.eos(), eos=d.eos(), unk=d.unk(),
                     mask=d.unk())

    torch.manual_seed(args.seed)
    ours = Transformer.build(settings, vocab(src_dict), vocab(tgt_dict))
    first = src_dict.pad() + 1  # fairseq's first position
    for side in (ours.encoder, ours.decoder):
        side.embedder.positions = sinusoids(cfg.max_positions + first, cfg.d_model)[first:]
    names = fairseq_names(cfg)
    copied = {}
    for key, value in ours.state_dict().items():
        prefix = next(p for p in names if key.startswith(p))
        copied[names[prefix] + key[len(prefix):]] = value
    copied["decoder.output_projection.weight"] = copied["decoder.embed_tokens.weight"]
    missing, _ = theirs.load_state_dict(copied, strict=False)
    assert not [k for k in missing if "_proj" in k and "layers" not in k], missing

    task.load_dataset("train")
    epochs = task.get_batch_iterator(task.dataset("train"), max_tokens=args.max_tokens,
                                     required_batch_size_multiple=8, seed=args.seed)
    batches = (sample for _ in range(updates) for sample in epochs.next_epoch_itr(shuffle=True))
    pad = src_dict.pad()

    def right_padded(rows: torch.Tensor) -> torch.Tensor:
        kept = [r[r != pad].tolist() for r in rows]
        width = max(map(len, kept))
        return torch.tensor([r + [pad] * (width - len(r)) for r in kept])

    their_params = [p for p in theirs.parameters() if p.requires_grad]
    betas = eval(args.adam_betas)  # noqa: S307 (fairseq's own format, "(0.9, 0.98)")
    their_opt = FairseqAdam(their_params, lr=args.lr[0], betas=betas, eps=args.adam_eps)
    our_opt = torch.optim.Adam(ours.parameters(), lr=args.lr[0], betas=betas, eps=args.adam_eps)
    losses = []
    for step in range(updates):
        sample = next(batches)
        batch = Batch(src=right_padded(sample["net_input"]["src_tokens"]),
                      tgt_in=sample["net_input"]["prev_output_tokens"], tgt_out=sample["target"],
                      ids=sample["id"])
        lr = args.warmup_init_lr + (args.lr[0] - args.warmup_init_lr) * step / args.warmup_updates
        for opt in (their_opt, our_opt):
            for group in opt.param_groups:
                group["lr"] = lr
        theirs.train()
        ours.train()
        their_opt.zero_grad()
        loss, sample_size, _ = criterion(theirs, sample)
        (loss / sample_size).backward()
        fairseq_utils.clip_grad_norm_(their_params, args.clip_norm)
        their_opt.step()
        our_opt.zero_grad()
        our_loss, _ = ours.loss(batch)
        our_loss.backward()
        torch.nn.utils.clip_grad_norm_(ours.parameters(), args.clip_norm)
        our_opt.step()
        losses.append(((loss / sample_size).item(), our_loss.item()))
    print(json.dumps({"updates": updates, "first_loss": losses[0],
                      "last_loss": losses[-1],
                      "max_abs_difference": max(abs(a - b) for a, b in losses)}))


if __name__ == "__main__":
    main()
