"""No command writes where it reads: an output that is, contains or lies inside one of the
command's inputs (a run's files and every path its config.json records count) is refused with
one line before anything is written, and the input is left byte for byte as it was. A
directory output replaces only an earlier output of the same command."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from nmtbench import cli
from nmtbench.errors import InputError
from nmtbench.fileio import atomic_directory

RUN = "runs/toy/r/seed1"
RUN2 = "runs/toy/q/seed1"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """A run directory whose config.json records a tokenizer and a BERT, and text files."""
    run = tmp_path / RUN
    (run / "checkpoints").mkdir(parents=True)
    bert, tok = tmp_path / "pretrained" / "bert", tmp_path / "tok"
    bert.mkdir(parents=True)
    tok.mkdir()
    (bert / "config.json").write_text("{}")
    (bert / "model.safetensors").write_bytes(b"weights")
    (tok / "vocab.txt").write_text("[PAD]\n")
    (run / "config.json").write_text(json.dumps({
        "experiment": {"method": "transformer"},
        "paths": {"src_tokenizer": str(tok), "tgt_tokenizer": str(tok),
                  "pretrained": {"src_bert": str(bert)}}}))
    (run / "train_summary.json").write_text("{}")
    (run / "checkpoints" / "best.pt").write_bytes(b"checkpoint")
    (tmp_path / RUN2 / "checkpoints").mkdir(parents=True)  # a second run
    (tmp_path / RUN2 / "config.json").write_text("{}")
    (tmp_path / "downloads").mkdir()
    (tmp_path / "other" / "checkpoints").mkdir(parents=True)  # another run's
    (tmp_path / "other" / "best.pt").write_bytes(b"checkpoint")
    (tmp_path / "pretrained" / "other").mkdir()  # another checkpoint
    (tmp_path / "pretrained" / "other" / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "data" / "toy" / "prepared").mkdir(parents=True)
    (tmp_path / "data" / "toy" / "prepared" / "test.tgt").write_text("a b\n")
    (tmp_path / "results" / "runs").mkdir(parents=True)
    (tmp_path / "to-prepared").symlink_to(tmp_path / "data" / "toy" / "prepared")
    (tmp_path / "to-checkpoints").symlink_to(tmp_path / "other" / "checkpoints")
    (tmp_path / "claims.md").write_text("datasets: {}\n")
    (tmp_path / "report.json").write_text("{}\n")
    for name in ("src", "hyp", "ref"):
        (tmp_path / name).write_text("a b\n")
    return tmp_path


def contents(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def run_args(d: Path) -> list:
    return ["--run-dir", d / RUN]


# (command line given the directory, the start of its one error line)
CASES: dict[str, tuple[Callable[[Path], list], str]] = {
    "decode over its source": (
        lambda d: ["decode", *run_args(d), "--src", d / "src", "--out", d / "src"],
        "--out {d}/src is the input {d}/src"),
    "decode over the run's config.json": (
        lambda d: ["decode", *run_args(d), "--src", d / "src", "--out", d / RUN / "config.json"],
        "--out {d}/" + RUN + "/config.json is the input {d}/" + RUN + "/config.json"),
    "export into its run directory": (
        lambda d: ["export", *run_args(d), "--out", d / RUN],
        "--out {d}/" + RUN + " contains the input {d}/" + RUN + "/config.json"),
    # a new directory inside a run: the run's next training would refuse its directory
    **{f"{command} into a new directory inside the run": (
        lambda d, args=args: [*args(d), "--out", d / RUN / "new"],
        "--out {d}/" + RUN + "/new lies inside the run directory {d}/" + RUN) for command, args
       in (("export", lambda d: ["export", *run_args(d)]),
           ("tokenizer", lambda d: ["tokenizer", "--corpus", d / "src", "--vocab-size", "50"]),
           ("toyworld", lambda d: ["toyworld", "--world", '{"train_pairs": 5, "valid_pairs": 2, '
                                   '"test_pairs": 2, "mono_sentences": 5}']))},
    "export into the BERT the run reads": (
        lambda d: ["export", *run_args(d), "--out", d / "pretrained" / "bert"],
        "--out {d}/pretrained/bert is the input {d}/pretrained/bert"),
    "export into the run's checkpoints": (
        lambda d: ["export", *run_args(d), "--out", d / RUN / "checkpoints" / "hf"],
        "--out {d}/" + RUN + "/checkpoints/hf lies inside the input {d}/" + RUN
        + "/checkpoints"),
    "trim over its checkpoint": (
        lambda d: ["trim", "--checkpoint", d / "pretrained" / "bert", "--corpus", d / "src",
                   "--size", "10", "--out", d / "pretrained" / "bert"],
        "--out {d}/pretrained/bert is the input {d}/pretrained/bert"),
    "trim into the directory holding its checkpoint": (
        lambda d: ["trim", "--checkpoint", d / "pretrained" / "bert", "--corpus", d / "src",
                   "--size", "10", "--out", d / "pretrained"],
        "--out {d}/pretrained contains the input {d}/pretrained/bert"),
    "pretrain into its tokenizer": (
        lambda d: ["pretrain", "--corpus", d / "src", "--tokenizer", d / "tok", "--out",
                   d / "tok", "--settings", "{}"],
        "--out {d}/tok is the input {d}/tok"),
    "pretrain over its training-only text": (
        lambda d: ["pretrain", "--corpus", d / "src", "--train-only", d / "ref", "--tokenizer",
                   d / "tok", "--out", d / "ref", "--settings", "{}"],
        "--out {d}/ref is the input {d}/ref"),
    "tokenizer over its corpus": (
        lambda d: ["tokenizer", "--corpus", d / "src", "--out", d / "src", "--vocab-size", "50"],
        "--out {d}/src is the input {d}/src"),
    "evaluate over its hypotheses": (
        lambda d: ["evaluate", "--summary", d / RUN / "train_summary.json", "--run-config",
                   d / RUN / "config.json", "--split", "test", "--hyp", d / "hyp", "--ref",
                   d / "ref", "--out", d / "hyp"],
        "--out {d}/hyp is the input {d}/hyp"),
    "bootstrap over its reference": (
        lambda d: ["bootstrap", "--hyp", d / "hyp", "--baseline", d / "hyp", "--ref", d / "ref",
                   "--out", d / "ref"],
        "--out {d}/ref is the input {d}/ref"),
    "buckets over its hypotheses": (
        lambda d: ["buckets", "--hyp", d / "hyp", "--ref", d / "ref", "--out", d / "hyp",
                   "--cutoffs", "5"],
        "--out {d}/hyp is the input {d}/hyp"),
    "soft targets over the training sources": (
        lambda d: ["soft-targets", *run_args(d), "--train-src", d / "src", "--train-tgt",
                   d / "ref", "--valid-src", d / "src", "--valid-tgt", d / "ref", "--out",
                   d / "src"],
        "--out {d}/src is the input {d}/src"),
    "latency over the baseline's summary": (
        lambda d: ["latency", *run_args(d), "--src", d / "src", "--baseline-run-dir",
                   d / RUN, "--out", d / RUN / "train_summary.json"],
        "--out {d}/" + RUN + "/train_summary.json is the input"),
    "train in a directory holding its data": (
        lambda d: ["train", "--run-dir", d, "--config", "{}", "--train-src", d / "src",
                   "--train-tgt", d / "ref", "--valid-src", d / "src", "--valid-tgt", d / "ref",
                   "--src-tokenizer", d / "tok", "--tgt-tokenizer", d / "tok"],
        "--run-dir {d} contains the input {d}/src"),
    "train over the BERT it loads": (
        lambda d: ["train", "--run-dir", d / "pretrained" / "bert", "--config", "{}",
                   "--train-src", d / "src", "--train-tgt", d / "ref", "--valid-src",
                   d / "src", "--valid-tgt", d / "ref", "--src-tokenizer", d / "tok",
                   "--tgt-tokenizer", d / "tok", "--pretrained",
                   f"src_bert={d / 'pretrained' / 'bert'}"],
        "--run-dir {d}/pretrained/bert is the input {d}/pretrained/bert"),
    "report into a run": (
        lambda d: ["report", "--results", d, "--out", d / RUN / "config.json", "--config", "{}"],
        "--out {d}/" + RUN + "/config.json lies inside the input {d}/runs"),
    "report over a config file it reads": (
        lambda d: ["report", "--configfile", d / "src", "--results", d, "--out", d / "src"],
        "--out {d}/src is the input {d}/src"),
    "report into the workflow's paper files": (
        lambda d: ["report", "--results", d, "--out", ROOT / "papers" / "tables.md",
                   "--config", "{}"],
        f"--out {ROOT}/papers/tables.md lies inside the input {ROOT}/papers"),
    # the checkout whose config/ and papers/ the report reads (--root), and whose git commit
    # it records
    "report into the papers of its --root": (
        lambda d: ["report", "--root", d, "--results", d, "--out", d / "papers" / "x.yaml",
                   "--config", "{}"],
        "--out {d}/papers/x.yaml lies inside the input {d}/papers"),
    "report over the checkout's git HEAD": (
        lambda d: ["report", "--results", d, "--out", ROOT / ".git" / "HEAD", "--config", "{}"],
        f"--out {ROOT}/.git/HEAD lies inside the input {ROOT}/.git"),
    # what the report reads besides the runs: the test sets its scores name (data/ beside
    # results/); claims.md, tables.json and figures/ are written beside --out too
    "report over a test set": (
        lambda d: ["report", "--results", d / "results", "--out",
                   d / "data" / "toy" / "prepared" / "test.tgt", "--config", "{}"],
        "--out {d}/data/toy/prepared/test.tgt lies inside the input {d}/data"),
    "report's claims over a config file it reads": (
        lambda d: ["report", "--configfile", d / "claims.md", "--results", d, "--out",
                   d / "tables.md"],
        "--out (claims.md beside it) {d}/claims.md is the input {d}/claims.md"),
    "report's tables.json over a config file it reads": (
        lambda d: ["report", "--configfile", d / "report.json", "--results", d, "--out",
                   d / "report.md"],
        "--out (its .json beside it) {d}/report.json is the input {d}/report.json"),
    # files that another command makes and the workflow reads
    "decode over another run's checkpoint": (
        lambda d: ["decode", *run_args(d), "--src", d / "src", "--out",
                   d / "other" / "best.pt"],
        "--out {d}/other/best.pt is a file another command makes (best.pt)"),
    "buckets into another run's checkpoints": (
        lambda d: ["buckets", "--hyp", d / "hyp", "--ref", d / "ref", "--cutoffs", "5",
                   "--out", d / "other" / "checkpoints" / "scores.json"],
        "--out {d}/other/checkpoints/scores.json lies inside {d}/other/checkpoints, a "
        "directory another command makes as a whole"),
    "bootstrap into a BERT's directory": (
        lambda d: ["bootstrap", "--hyp", d / "hyp", "--baseline", d / "hyp", "--ref", d / "ref",
                   "--out", d / "pretrained" / "other" / "b.json"],
        "--out {d}/pretrained/other/b.json lies inside {d}/pretrained/other, a directory"),
    # a file in a run directory under another command's name (its record the report reads)
    # or a name no run holds (its next training would refuse the directory)
    "buckets over a run's metrics": (
        lambda d: ["buckets", "--hyp", d / "hyp", "--ref", d / "ref", "--cutoffs", "5",
                   "--out", d / RUN / "metrics.test.t.json"],
        "--out {d}/" + RUN + "/metrics.test.t.json lies in the run directory {d}/" + RUN
        + ", where buckets writes only buckets.*.*.*.json"),
    "decode into a run under a name no run holds": (
        lambda d: ["decode", *run_args(d), "--src", d / "src", "--out", d / RUN / "notes.txt"],
        "--out {d}/" + RUN + "/notes.txt lies in the run directory {d}/" + RUN + ", where "
        "decode writes only hyp.*.*.txt, decode.*.*.json,"),
    "download into a run's tensorboard/": (
        lambda d: ["download", "--url", f"file://{d}/src", "--out",
                   d / RUN / "tensorboard" / "x"],
        "--out {d}/" + RUN + "/tensorboard/x lies in the run directory {d}/" + RUN + ", where "
        "download writes nothing"),
    # anywhere inside a checkpoint's or a vocabulary's directory (its digest covers every
    # file in it), a prepared dataset (its command would refuse to make it again) or a run
    "a vocabulary inside the BERT's directory": (
        lambda d: ["tokenizer", "--corpus", d / "src", "--vocab-size", "50", "--out",
                   d / "pretrained" / "other" / "tok"],
        "--out {d}/pretrained/other/tok lies inside {d}/pretrained/other, a directory "
        "another command makes as a whole"),
    "decode deep inside a vocabulary's directory": (
        lambda d: ["decode", *run_args(d), "--src", d / "src", "--out",
                   d / "pretrained" / "other" / "a" / "hyp.txt"],
        "--out {d}/pretrained/other/a/hyp.txt lies inside {d}/pretrained/other, a directory"),
    "trim into a prepared dataset": (
        lambda d: ["trim", "--checkpoint", d / "pretrained" / "bert", "--corpus", d / "src",
                   "--size", "10", "--out", d / "data" / "toy" / "prepared" / "trimmed"],
        "--out {d}/data/toy/prepared/trimmed lies inside {d}/data/toy/prepared, a directory"),
    "train inside another run": (
        lambda d: ["train", "--run-dir", d / RUN / "inner", "--config", "{}", "--train-src",
                   d / "src", "--train-tgt", d / "ref", "--valid-src", d / "src",
                   "--valid-tgt", d / "ref", "--src-tokenizer", d / "tok", "--tgt-tokenizer",
                   d / "tok"],
        "--run-dir {d}/" + RUN + "/inner lies inside the run directory {d}/" + RUN),
    # a run's file of its own name, but in another run's directory: scored as the other's
    "decode into another run's hypotheses": (
        lambda d: ["decode", *run_args(d), "--src", d / "src", "--out",
                   d / RUN2 / "hyp.test.t.txt"],
        "--out {d}/" + RUN2 + "/hyp.test.t.txt lies in the run directory {d}/" + RUN2
        + ", not in {d}/" + RUN + ", the run it is of"),
    "buckets of one run's hypotheses into another's directory": (
        lambda d: ["buckets", "--hyp", d / RUN / "hyp.test.t.txt", "--ref", d / "ref",
                   "--cutoffs", "5", "--out", d / RUN2 / "buckets.test.t.5.json"],
        "--out {d}/" + RUN2 + "/buckets.test.t.5.json lies in the run directory {d}/" + RUN2
        + ", not in {d}/" + RUN + ", the run it is of"),
    # two outputs of one command: the later written would replace the earlier
    "decode with its record over its hypotheses": (
        lambda d: ["decode", *run_args(d), "--src", d / "src", "--out", d / "new.txt",
                   "--info", d / "new.txt"],
        "--out {d}/new.txt and --info {d}/new.txt are one path or one holds the other"),
    "soft targets with their record inside them": (
        lambda d: ["soft-targets", *run_args(d), "--train-src", d / "src", "--train-tgt",
                   d / "ref", "--valid-src", d / "src", "--valid-tgt", d / "ref", "--out",
                   d / "soft", "--info", d / "soft" / "info.json"],
        "--out {d}/soft and --info {d}/soft/info.json are one path or one holds the other"),
    # through a link to the directory: written where the link leads
    "decode over a test set through a link": (
        lambda d: ["decode", *run_args(d), "--src", d / "src", "--out",
                   d / "to-prepared" / "test.tgt"],
        "--out {d}/to-prepared/test.tgt is a file another command makes (test.tgt)"),
    "decode into another run's checkpoints through a link": (
        lambda d: ["decode", *run_args(d), "--src", d / "src", "--out",
                   d / "to-checkpoints" / "hyp.txt"],
        "--out {d}/to-checkpoints/hyp.txt lies inside {d}/other/checkpoints, a directory "
        "another command makes as a whole"),
    "prepare into its downloads": (
        lambda d: ["prepare", "--dataset", "x", "--spec", "{}", "--downloads", d / "downloads",
                   "--out", d / "downloads" / "prepared"],
        "--out {d}/downloads/prepared lies inside the input {d}/downloads"),
}


@pytest.mark.parametrize("case", CASES)
def test_an_output_over_an_input_is_refused_and_the_input_kept(world, case, capsys):
    command, expected = CASES[case]
    before = contents(world)
    assert cli.main([*map(str, command(world))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {expected.format(d=world)}"), err
    assert err.rstrip().endswith(("the command would overwrite what it reads; write to "
                                  "another path", "; write to another path"))
    assert contents(world) == before


def test_a_run_file_of_the_command_s_own_name_is_written(world):
    """What the workflow's rules write into a run directory passes the guard above."""
    for command, name in (("decode", "hyp.test.t.txt"), ("decode", "decode.test.t.json"),
                          ("evaluate", "metrics.test.t.json"), ("latency", "latency.t.json"),
                          ("buckets", "buckets.test.t.5-10.json"),
                          ("soft-targets", "soft_targets.top8.safetensors")):
        cli._refuse_outputs_in_made_directories(command, {"--out": world / RUN / name})


def test_a_scratch_path_merely_named_like_the_workflow_s_directories_is_written(tmp_path):
    """Only the directories themselves are guarded, not every path through a directory named
    checkpoints or prepared (a cluster's scratch space)."""
    for name in ("checkpoints", "prepared"):
        (tmp_path / name / "work").mkdir(parents=True)
        for command in ("decode", "export"):
            cli._refuse_outputs_in_made_directories(command, {
                "--out": tmp_path / name / "work" / "out"})


def test_a_directory_output_replaces_only_an_earlier_output_of_its_command(tmp_path):
    """An unrelated directory is never deleted; an empty one or an earlier output is."""
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match=r"mine: a directory that is not an earlier output of "
                                         r"this command \(it has no summary.json\)"):
        with atomic_directory(foreign, "summary.json") as out:
            (out / "summary.json").write_text("{}")
    assert (foreign / "notes.txt").read_text() == "keep me"
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]

    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="a file, not a directory"):
        with atomic_directory(tmp_path / "file", "summary.json"):
            pass
    assert (tmp_path / "file").read_text() == "x"

    for first in ("empty", "earlier"):
        target = tmp_path / first
        target.mkdir()
        if first == "earlier":
            (target / "summary.json").write_text("{}")
            (target / "old").write_text("old")
        with atomic_directory(target, "summary.json") as out:
            (out / "summary.json").write_text('{"new": 1}')
        assert sorted(p.name for p in target.iterdir()) == ["summary.json"]


def test_a_directory_holding_another_commands_files_is_not_written_into(world, capsys):
    """A vocabulary trained into a pre-trained checkpoint's directory would replace the
    checkpoint's own vocabulary beside its weights (a run directory: test_trainer)."""
    bert = world / "pretrained" / "bert"
    before = contents(world)
    assert cli.main(["tokenizer", "--corpus", str(world / "src"), "--out", str(bert),
                     "--vocab-size", "50"]) == 2
    assert capsys.readouterr().err == (f"error: {bert}: it holds config.json, which no "
                                       "vocabulary's directory holds; write to a new directory\n")
    assert contents(world) == before


def test_a_toy_world_is_not_written_into_a_run_or_a_checkpoint(world, capsys):
    """`toyworld --out` into a directory holding anything but a toy world's corpora (a run's
    records, a checkpoint) is refused, and the directory left as it was."""
    sizes = '{"train_pairs": 5, "valid_pairs": 2, "test_pairs": 2, "mono_sentences": 5}'
    for directory, holds in ((world / RUN, "checkpoints"), (world / "pretrained" / "bert",
                                                            "config.json")):
        before = contents(world)
        assert cli.main(["toyworld", "--out", str(directory), "--world", sizes]) == 2
        assert capsys.readouterr().err == (f"error: {directory}: it holds {holds}, which no toy "
                                           "world holds; write to a new directory\n")
        assert contents(world) == before


def test_a_seed_numpy_cannot_take_is_one_line(world, capsys):
    with pytest.raises(SystemExit):
        cli.main(["bootstrap", "--hyp", str(world / "hyp"), "--baseline", str(world / "hyp"),
                  "--ref", str(world / "ref"), "--out", str(world / "b.json"),
                  "--seed", str(2 ** 64)])
    assert "argument --seed: 18446744073709551616 is more than 4294967295" in (
        capsys.readouterr().err)
