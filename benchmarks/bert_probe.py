"""Does a pre-trained BERT keep token identity in its layers? A linear probe per layer.

A frozen BERT fused into NMT (its output as embeddings, BERT-fused, AB-Net's frozen encoder)
only helps if its top layer still says which token stands where. This reads a HF-format BERT
directory (a toy BERT from the DAG, or any local checkpoint) and the held-out end of its
monolingual corpus (the lines pre-training held out), runs the BERT over them unmasked, and
fits a linear classifier from each layer's states to the token at that position (multinomial
logistic regression, full-batch Adam) on the tokens of the first half of the sentences; it
reports accuracy on the second half. Special tokens are left out.

    python benchmarks/bert_probe.py data/pretrained/toy-bert-src data/toy/prepared/mono.src
"""

from __future__ import annotations

import argparse
import json

import torch

from nmtbench.data.tokenization import load_tokenizer
from nmtbench.fileio import read_lines
from nmtbench.parts.pretrained import load_model


@torch.no_grad()
def layer_states(bert_dir: str, lines: list[str]) -> tuple[list[torch.Tensor], torch.Tensor,
                                                            torch.Tensor]:
    """Per layer (embeddings first) the states (N, H) of every non-special token of `lines`,
    the token ids (N,) and the index of the sentence each token comes from (N,)."""
    tok = load_tokenizer(bert_dir)
    model = load_model(bert_dir, add_pooling_layer=False).eval()
    special = set(tok.all_special_ids)
    per_layer: list[list[torch.Tensor]] = []
    ids, sentence = [], []
    for i, line in enumerate(lines):
        encoded = tok(line, return_tensors="pt")
        hidden = model(**encoded, output_hidden_states=True).hidden_states
        keep = torch.tensor([t not in special for t in encoded["input_ids"][0].tolist()])
        if not per_layer:
            per_layer = [[] for _ in hidden]
        for layer, states in zip(per_layer, hidden, strict=True):
            layer.append(states[0][keep])
        ids.append(encoded["input_ids"][0][keep])
        sentence.append(torch.full((int(keep.sum()),), i))
    return [torch.cat(layer) for layer in per_layer], torch.cat(ids), torch.cat(sentence)


def probe_accuracy(x: torch.Tensor, y: torch.Tensor, train: torch.Tensor, vocab: int,
                   steps: int) -> float:
    """Held-out accuracy of a linear classifier x -> y fitted on the rows `train` selects."""
    torch.manual_seed(0)
    mean, std = x[train].mean(0), x[train].std(0) + 1e-6
    x = (x - mean) / std
    probe = torch.nn.Linear(x.size(1), vocab)
    optimizer = torch.optim.Adam(probe.parameters(), lr=0.05)
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(probe(x[train]), y[train]).backward()
        optimizer.step()
    with torch.no_grad():
        return float((probe(x[~train]).argmax(-1) == y[~train]).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bert", help="HF-format BERT directory")
    parser.add_argument("corpus", help="its monolingual corpus; the last --sentences lines "
                        "are probed (the lines toy pre-training holds out)")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=300, help="probe training steps")
    args = parser.parse_args()
    torch.set_num_threads(1)
    lines = read_lines(args.corpus)[-args.sentences:]
    states, ids, sentence = layer_states(args.bert, lines)
    train = sentence < len(lines) // 2
    vocab = int(ids.max()) + 1
    accuracy = {("embeddings" if i == 0 else f"layer{i}"): round(
        probe_accuracy(x, ids, train, vocab, args.steps), 4) for i, x in enumerate(states)}
    print(json.dumps({"bert": args.bert, "probed_tokens": int((~train).sum()),
                      "accuracy": accuracy}))


if __name__ == "__main__":
    main()
