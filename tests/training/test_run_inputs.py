"""What a run takes from other runs and what it leaves for them: a warm start from another
run's checkpoint (`init_from`), per-example side data kept aligned through filtering and
concatenation, and checkpoints that leave frozen pre-trained weights out yet rebuild the same
model for translation."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tiny_checkpoints import save_tiny_bert, write_bert_corpus

from nmtbench.data.tokenization import load_tokenizer, train_wordpiece
from nmtbench.errors import InputError
from nmtbench.evaluation.translate import load_run_model, translate_lines
from nmtbench.parts import checkpoints
from nmtbench.parts.batches import Bitext
from nmtbench.run_paths import RunPaths
from nmtbench.training.trainer import Trainer
from nmtbench.workflow import run_inputs
from nmtbench.workflow.config import check, load_config

ROOT = Path(__file__).resolve().parents[2]
CFG = {"method": "transformer", "size": "tiny", "d_model": 32, "ffn_dim": 64, "n_heads": 2,
       "encoder_layers": 1, "decoder_layers": 1, "max_tokens": 800, "lr": 0.003,
       "warmup_updates": 5, "clip_norm": 1.0, "max_epochs": 1, "log_interval": 1, "seed": 3}


def train_log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]


def weights_before_training(trainer: Trainer) -> dict[str, torch.Tensor]:
    """Run the trainer; return its model's weights as they were at the first update."""
    seen: dict[str, torch.Tensor] = {}
    original = trainer._train_step

    def step(group):
        if not seen:
            seen.update({k: v.detach().clone() for k, v in trainer.model.state_dict().items()})
        return original(group)

    trainer._train_step = step
    trainer.run()
    return seen


# --- init_from: a warm start from another run ----------------------------------------------

def test_a_warm_started_run_begins_with_the_other_runs_weights(toy_paths, tmp_path):
    torch.set_num_threads(1)
    first = tmp_path / "first"
    Trainer(first, CFG, toy_paths, device="cpu").run()
    best = first / "checkpoints" / "best.pt"
    teacher = checkpoints.load(best)["model"]

    inputs = replace(toy_paths, inputs={"init_from": str(best)})
    second = tmp_path / "second"
    start = weights_before_training(Trainer(second, {**CFG, "seed": 4}, inputs, device="cpu"))
    assert start.keys() == teacher.keys()
    for name, tensor in teacher.items():
        assert torch.equal(start[name], tensor), name
    events = [r for r in train_log(second) if r["event"] == "warm_start"]
    assert events == [{"step": 0, "epoch": 1, "event": "warm_start", "input": "init_from",
                       "from": str(best),
                       "missing": [], "unexpected": []}]

    # another architecture: what the checkpoint fills is loaded, the rest is listed
    pre_norm = tmp_path / "pre-norm"
    start = weights_before_training(
        Trainer(pre_norm, {**CFG, "pre_norm": True}, inputs, device="cpu"))
    for name, tensor in teacher.items():
        assert torch.equal(start[name], tensor), name
    (event,) = [r for r in train_log(pre_norm) if r["event"] == "warm_start"]
    assert event["missing"] == ["decoder.norm.bias", "decoder.norm.weight",
                                "encoder.norm.bias", "encoder.norm.weight"]
    assert event["unexpected"] == []


def test_a_warm_start_from_a_run_of_another_vocabulary_is_one_line(toy_paths, toy_dir,
                                                                   tmp_path):
    """The parent read its target side with another vocabulary of the same size (two hub
    checkpoints of different names, which the plan cannot compare before they are
    downloaded): its embedding rows would stand for other words, so training refuses."""
    torch.set_num_threads(1)
    first = tmp_path / "first"
    Trainer(first, CFG, toy_paths, device="cpu").run()
    other = tmp_path / "other_tgt"
    size = len(load_tokenizer(toy_paths.tgt_tokenizer).get_vocab())
    train_wordpiece([toy_dir / "train.src"], other, size)  # the other language's pieces
    assert len(load_tokenizer(other).get_vocab()) == size
    inputs = replace(toy_paths, tgt_tokenizer=str(other),
                     inputs={"init_from": str(first / "checkpoints" / "best.pt")})
    with pytest.raises(InputError) as err:
        Trainer(tmp_path / "second", CFG, inputs, device="cpu").run()
    assert str(err.value) == (f"init_from: {first} read the tgt side with the vocabulary of "
                              f"{toy_paths.tgt_tokenizer}, another than this run's; warm-start "
                              "from a run of the same vocabulary")


def test_a_resumed_run_does_not_warm_start_again(toy_paths, tmp_path):
    torch.set_num_threads(1)
    first = tmp_path / "first"
    Trainer(first, CFG, toy_paths, device="cpu").run()
    inputs = replace(toy_paths, inputs={"init_from": str(first / "checkpoints" / "best.pt")})
    run = tmp_path / "run"
    Trainer(run, CFG, inputs, device="cpu").run()
    own = checkpoints.load(run / "checkpoints" / "last.pt")
    # more epochs: resumes from its own last.pt, not from init_from
    start = weights_before_training(Trainer(run, {**CFG, "max_epochs": 2}, inputs, "cpu"))
    for name, tensor in own["model"].items():
        assert torch.equal(start[name], tensor), name
    log = train_log(run)
    assert [r["event"] for r in log if r["event"] in ("warm_start", "resume")] == [
        "warm_start", "resume"]


def test_an_unknown_run_input_is_an_input_error(toy_paths, tmp_path):
    with pytest.raises(InputError, match="unknown run input 'teacher'; known: bt_src, bt_tgt, "
                                         "distilled_targets, init_from, soft_targets$"):
        Trainer(tmp_path / "run", CFG, replace(toy_paths, inputs={"teacher": "x.pt"}), "cpu")


def test_a_model_without_side_data_refuses_soft_targets(toy_paths, tmp_path):
    """A run input of a kind its model does not take is one line, not ignored."""
    soft = tmp_path / "soft_targets.top8.safetensors"
    soft.write_bytes(b"soft targets")
    with pytest.raises(InputError, match=r"^run input 'soft_targets': this model "
                                         r"\(EncoderDecoder\) takes no side data$"):
        Trainer(tmp_path / "run", CFG, replace(toy_paths, inputs={"soft_targets": str(soft)}),
                "cpu")


@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/paper.yaml"])
def test_every_input_the_plan_gives_a_run_is_a_kind_the_trainer_takes(configfile):
    """The plan resolves run inputs through the registered kinds, and the trainer groups a
    run's inputs by the same kinds: each name the plan gives, a kind provides."""
    files = ["config/config.yaml"] + ([configfile] if configfile != "config/config.yaml" else [])
    config = load_config([ROOT / f for f in files])
    plan = check(config, ROOT / "config" / "schema.yaml", ROOT / "papers")
    given = 0
    for dataset, run in plan.runs():
        inputs = plan.run_inputs(dataset, run)
        parents = plan.implemented[plan.experiments[run]["method"]].parent_runs
        settings = plan.run_settings(dataset, run, 1)
        grouped = run_inputs.by_kind({name: "x" for name in inputs}, parents, settings)
        assert sorted(n for _, names in grouped for n in names) == sorted(inputs)
        given += len(inputs)
    assert given  # the configs give runs inputs of several kinds


# --- side data by line number --------------------------------------------------------------

def encoded(toy_dir: Path, src: list[str], tgt: list[str], max_positions: int) -> Bitext:
    src_tok, tgt_tok = (load_tokenizer(toy_dir / f"tok_{s}") for s in ("src", "tgt"))
    return Bitext.encode(src, tgt, src_tok, tgt_tok, max_positions, "corpus", src_bos=False)


def soft(line: int, length: int) -> torch.Tensor:
    """Side data of one line: `length` rows of 3 values, all the line number + 1."""
    return torch.full((length, 3), float(line + 1))


def test_side_data_follows_its_line_through_filtering_concatenation_and_batches(toy_dir):
    words = (toy_dir / "train.src").read_text().split()[:40]
    long = " ".join(words)  # longer than max_positions: dropped
    first = encoded(toy_dir, ["a b", long, "c", "d e f"], ["x", "y", "z z", "w"], 12)
    assert first.lines == [0, 2, 3] and first.corpus_lines == 4
    first.attach("soft", {line: soft(line, line + 1) for line in range(4)}, "soft.pt")
    second = encoded(toy_dir, ["g", "h i"], ["u v", "t"], 12)
    second.attach("soft", [soft(4 + line, 1) for line in range(2)], "more.pt")  # a list
    both = first + second
    assert both.lines == [0, 2, 3, 4, 5] and both.corpus_lines == 6
    for i, line in enumerate(both.lines):
        assert torch.equal(both.extras["soft"][i][0], torch.full((3,), float(line + 1)))

    batch = both.collate([3, 1, 0])  # any order
    assert batch.ids.tolist() == [4, 2, 0]
    extras = batch.extras["soft"]
    assert extras.shape == (3, 3, 3)  # the longest: line 2's 3 rows
    for row, (line, length) in enumerate([(4, 1), (2, 3), (0, 1)]):
        assert torch.equal(extras[row, :length], soft(line, length))
        assert not extras[row, length:].any()  # zero-padded
    assert batch.to("cpu").extras["soft"] is not None

    scalar = encoded(toy_dir, ["a", "b"], ["x", "y"], None)
    scalar.attach("weight", {0: torch.tensor(0.5), 1: torch.tensor(2.0)}, "w")
    assert scalar.collate([1, 0]).extras["weight"].tolist() == [2.0, 0.5]


def test_side_data_must_cover_every_line_and_match_to_concatenate(toy_dir):
    data = encoded(toy_dir, ["a", "b", "c"], ["x", "y", "z"], None)
    with pytest.raises(InputError, match="soft.pt: nothing for line 3 of the corpus"):
        data.attach("soft", {0: soft(0, 1), 1: soft(1, 1)}, "soft.pt")
    data.attach("soft", [soft(i, 1) for i in range(3)], "soft.pt")
    with pytest.raises(InputError, match="cannot concatenate"):
        data + encoded(toy_dir, ["d"], ["w"], None)


# --- checkpoints without frozen pre-trained weights ----------------------------------------

FROZEN_RUNS = {
    "bert-frozen": ({"src_bert": "tiny-bert"}, "encoder.bert."),
    "abnet": ({"src_bert": "tiny-bert", "tgt_bert": "tiny-bert", "adapter_dim": 16,
               "decoding": "nat"}, ("encoder.bert.", "decoder.mlm.")),
}


@pytest.mark.parametrize("method", sorted(FROZEN_RUNS))
def test_a_frozen_bert_run_saves_no_bert_yet_translates_the_same_reloaded(method, tmp_path):
    torch.set_num_threads(1)
    bert = tmp_path / "bert"
    save_tiny_bert(bert, seed=5)
    settings, frozen_prefixes = FROZEN_RUNS[method]
    paths = RunPaths(**write_bert_corpus(tmp_path), src_tokenizer=str(bert),
                     tgt_tokenizer=str(bert),
                     pretrained={role: str(bert) for role in ("src_bert", "tgt_bert")
                                 if role in settings})
    cfg = {**CFG, "method": method, "d_model": 16, "ffn_dim": 32, "max_positions": 64,
           "dropout": 0.0, **settings}
    trainer = Trainer(tmp_path / "run", cfg, paths, device="cpu")
    trainer.run()
    model = trainer.model.eval()

    saved = checkpoints.load(tmp_path / "run" / "checkpoints" / "best.pt")["model"]
    frozen = {n for n, p in model.named_parameters(remove_duplicate=False)
              if not p.requires_grad}
    assert frozen and all(n.startswith(frozen_prefixes) for n in frozen)
    assert not frozen & saved.keys()
    assert saved.keys() == model.state_dict().keys() - frozen  # all the rest is saved

    loaded, src_tok, tgt_tok, _ = load_run_model(tmp_path / "run", device="cpu")
    own = model.state_dict()
    assert loaded.state_dict().keys() == own.keys()
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, own[name]), name
    sources = Path(paths.valid_src).read_text().splitlines()
    kw = {"beam": 2, "length_beam": 2, "iterations": 2}
    assert (translate_lines(loaded, src_tok, tgt_tok, sources, **kw)
            == translate_lines(model, trainer.src_tok, trainer.tgt_tok, sources, **kw))
