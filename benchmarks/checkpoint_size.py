"""AB-Net's checkpoint storage at WMT14 En-De settings (config/paper.yaml), computed from the
model built offline with random weights: what one checkpoint file and one run's 12 files
(keep_last_epochs 10, best, last) hold before Core v2 (whole state dict and Adam's moments in
every file) and now (no frozen pre-trained weights; Adam's moments in last.pt only).

    python benchmarks/checkpoint_size.py
"""

from nmtbench.data.tokenization import Vocab
from nmtbench.methods import get_method
from nmtbench.parts.pretrained import model_config

SETTINGS = {"method": "abnet", "size": "base", "src_bert": "bert-base-cased",
            "tgt_bert": "bert-base-german-cased", "adapter_dim": 2048, "decoding": "nat"}
FILES = 12


def vocab(checkpoint: str) -> Vocab:
    return Vocab(model_config(checkpoint).vocab_size, 0, 1, 2, 3, 4)


def gigabytes(tensors) -> float:
    return sum(t.numel() * t.element_size() for t in tensors) / 1e9


def main() -> None:
    model = get_method("abnet").build(SETTINGS, vocab(SETTINGS["src_bert"]),
                                      vocab(SETTINGS["tgt_bert"]), weights=False)
    whole = gigabytes(model.state_dict().values())
    saved = gigabytes(model.checkpoint_state().values())
    adam = 2 * gigabytes(model.trainable_parameters())
    print(f"model state: {whole:.3f} GB before, {saved:.3f} GB now; Adam moments {adam:.3f} GB")
    print(f"one file: {whole + adam:.3f} GB before; now {saved + adam:.3f} GB (last.pt), "
          f"{saved:.3f} GB (best, epochs)")
    print(f"one run ({FILES} files): {FILES * (whole + adam):.1f} GB before, "
          f"{saved + adam + (FILES - 1) * saved:.1f} GB now")


if __name__ == "__main__":
    main()
