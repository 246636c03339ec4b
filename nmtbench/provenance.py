"""What a result was made from, by content: a run records the digests of its inputs (data,
tokenizers, pre-trained checkpoints, other runs' outputs) and never resumes on other ones; every
output made from a finished training records that training's digest (of its
`train_summary.json`), and the report shows a number only while it still matches.

Content digests, not modification times: a file rewritten with the same bytes is still the same
input, and a copied results directory keeps its meaning.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from nmtbench import layout
from nmtbench.errors import InputError

TRAINED = "trained"  # key of an output's record: the digest of the training it was made from
CHUNK = 1 << 20


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror})") from None
    return digest.hexdigest()


# The records a command writes beside a checkpoint or vocabulary it made, about it (a
# pre-training's wall-clock seconds among them): no model or tokenizer reads them, so a
# checkpoint made again byte for byte keeps its digest
RECORDS = frozenset({layout.PRETRAIN_SUMMARY_NAME, layout.TRIM_SUMMARY_NAME,
                     layout.VOCABULARY_SUMMARY_NAME})
# The curves a pre-training writes beside its checkpoint (event files stamped with the clock
# and host, nmtbench.training.curves): left out always, as no digest made before held them
CURVES = frozenset({layout.TENSORBOARD_NAME, layout.WANDB_NAME})


def path_digest(path: str | Path, *, with_records: bool = False) -> str:
    """A file's digest, or a directory's: over its files' relative names and digests (hidden
    files such as locks and temporary files left out, the `CURVES` directories, and the
    `RECORDS` unless `with_records`, as digests were made before they were left out)."""
    path = Path(path)
    if not path.is_dir():
        return file_digest(path)
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        relative = item.relative_to(path)
        if (any(part.startswith(".") for part in relative.parts) or relative.parts[0] in CURVES
                or (not with_records and relative.as_posix() in RECORDS)):
            continue
        digest.update(f"{relative.as_posix()}\0{file_digest(item)}\n".encode())
    return digest.hexdigest()


def same_content(recorded: str | None, path: str | Path,
                 digest: Callable[[Path], str] = path_digest) -> bool:
    """Is `recorded` the digest of what is at `path` now? A directory's digest recorded before
    `RECORDS` were left out (with them) still counts, so that runs made before stay current."""
    path = Path(path)
    return recorded == digest(path) or (
        path.is_dir() and recorded == path_digest(path, with_records=True))


def input_paths(paths: Mapping[str, Any]) -> dict[str, Any]:
    """{name: path} of every path a run reads; nested mappings (pre-trained checkpoints, run
    inputs) give dotted names such as `pretrained.src_bert`."""
    flat = {}
    for name, value in paths.items():
        if isinstance(value, Mapping):
            flat |= {f"{name}.{k}": v for k, v in input_paths(value).items()}
        else:
            flat[name] = value
    return flat


def input_digests(paths: Mapping[str, Any]) -> dict[str, str]:
    """{name: digest} of every path a run reads (names as `input_paths` gives them)."""
    return {name: path_digest(path) for name, path in input_paths(paths).items()}


def changed_inputs(recorded: Mapping[str, str], paths: Mapping[str, Any], *,
                   missing_ok: bool = False,
                   digest: Callable[[Path], str] = path_digest) -> list[tuple[str, Path]]:
    """(name, path) of each of a run's inputs (`paths`, as the run was given them) whose
    content is no longer what `recorded` (its `inputs` digests) says. With `missing_ok`, an
    input that is not there is left out (a copied results directory without the data cannot
    tell); otherwise it cannot be read, an InputError."""
    stale = []
    for name, path in input_paths(paths).items():
        path = Path(path)
        if missing_ok and not path.exists():
            continue
        if not same_content(recorded.get(name), path, digest):
            stale.append((name, path))
    return stale


def changed(recorded: Mapping[str, str], current: Mapping[str, str],
            paths: Mapping[str, Any]) -> list[str]:
    """The names whose digest differs, or that only one side has, between two records of the
    inputs named by `paths` (as `input_paths` flattens them): a digest that `same_content`
    still takes for the path's is the same."""
    flat = input_paths(paths)
    return sorted(k for k in recorded.keys() | current.keys()
                  if recorded.get(k) != current.get(k) and not (
                      k in flat and all(same_content(side.get(k), flat[k])
                                        for side in (recorded, current))))


def training_digest(run_dir: str | Path) -> str:
    """The digest of a finished training (its summary records its inputs and its result)."""
    summary = Path(run_dir) / Path(layout.TRAIN_SUMMARY).name
    if not summary.is_file():
        raise InputError(f"{run_dir}: no {summary.name}; the run has not finished training")
    return file_digest(summary)


# The checkpoints a finished run's outputs are read from (decoding, warm starts, teachers and
# exports: best; a resume: last), each with its checksum file (nmtbench.parts.checkpoints)
READ_CHECKPOINTS = ("best", "last")
CHECKSUM_SUFFIX = ".sha256"


def lost_checkpoint(run_dir: str | Path, kept: Iterable[str] = ()) -> Path | None:
    """The first of a finished run's checkpoints that are read (READ_CHECKPOINTS) and their
    checksum files that is gone (deleted by hand); None while all are there, or while the run
    has not finished (its summary is not there). No job makes one again alone: a training
    that lost its best.pt can only train again. So are the numbered checkpoints it keeps
    (`kept`, their names: nmtbench.workflow.train_settings.kept_by_run), which averaging
    reads, any other there with its checksum file or the checksum file alone, and its
    train_log.jsonl (the report's curves)."""
    run_dir = Path(run_dir)
    if not (run_dir / Path(layout.TRAIN_SUMMARY).name).is_file():
        return None
    directory = run_dir / layout.CHECKPOINTS_NAME
    read = [*(directory / layout.CHECKPOINT_NAME.format(checkpoint=name)
              for name in READ_CHECKPOINTS), *(directory / name for name in kept)]
    # and every other checkpoint kept (epochN.pt, updateN.pt: averaging reads them) whose
    # checksum file is there without it, or it without its checksum file
    others = sorted({directory / p.name.removesuffix(CHECKSUM_SUFFIX)
                     for p in directory.glob(f"*.pt{CHECKSUM_SUFFIX}")}
                    | set(directory.glob("*.pt")))
    for checkpoint in [*read, *(p for p in others if p not in read)]:
        for path in (checkpoint, Path(f"{checkpoint}{CHECKSUM_SUFFIX}")):
            if not path.is_file():
                return path
    # the log its curves are drawn from: a resume writes only its own lines
    log = run_dir / layout.TRAIN_LOG_NAME
    return None if log.is_file() else log


def lost_checkpoint_line(run_dir: str | Path, kept: Iterable[str] = ()) -> str | None:
    """The one line that stops the workflow on a finished run that lost a checkpoint: its
    results (decodings, scores, the runs that learn from it) were made from the file, which
    only training the run again makes."""
    if (lost := lost_checkpoint(run_dir, kept)) is None:
        return None
    return (f"{lost} is gone, but the run's results were made from it and only training the "
            f"run again makes it; delete {run_dir} to train it again")


def lost_weights_line(directory: str | Path) -> str | None:
    """The one line that stops the workflow on a checkpoint directory a snapshot or a trim
    made (under data/pretrained/) whose weights were deleted by hand: its rule declares the
    directory's config.json alone (a hub repository's files vary), so no job would make them
    again, and the runs on it would be left out of the report for good."""
    directory = Path(directory)
    return _lost_beside_config(directory, any(directory.glob("*.safetensors")),
                               "weights (*.safetensors) are", "make")


def lost_summary_line(directory: str | Path) -> str | None:
    """The one line that stops the workflow on a checkpoint pre-trained here (under
    data/pretrained/) whose pretrain_summary.json was deleted by hand: the report's row of
    the checkpoint reads it, and its rule does not declare it (it marks the directory as the
    command's own earlier output, which Snakemake would delete before the job), so no job
    makes it again and the row would stay "missing" for good."""
    directory = Path(directory)
    return _lost_beside_config(directory, (directory / layout.PRETRAIN_SUMMARY_NAME).is_file(),
                               f"{layout.PRETRAIN_SUMMARY_NAME} is", "pre-train")


def _lost_beside_config(directory: Path, there: bool, lost: str, remake: str) -> str | None:
    """The line for a checkpoint directory whose config.json is there but whose `lost` files
    (`there`: whether they are) no job makes again; None where they are, or where the
    directory is not made yet (its rule makes it)."""
    if there or not (directory / layout.HF_CONFIG_NAME).is_file():
        return None
    them = "them" if lost.endswith(" are") else "it"
    return (f"{directory}: its {lost} gone, but its {layout.HF_CONFIG_NAME} is there, so no "
            f"job makes {them} again; delete {directory} to {remake} the checkpoint again")


def current(record: Mapping[str, Any], run_dir: str | Path) -> bool:
    """Was this output made from the training that is in `run_dir` now?"""
    summary = Path(run_dir) / Path(layout.TRAIN_SUMMARY).name
    return summary.is_file() and record.get(TRAINED) == file_digest(summary)


def git_commit(root: Path) -> str:
    """HEAD of `root`, with +dirty when the work tree has changes the commit does not hold
    (outside results/, which holds this report and the figures being written)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=False)
        if head.returncode != 0:
            return "uncommitted/unknown"
        status = subprocess.run(["git", "status", "--porcelain", "--", ".", ":(exclude)results"],
                                cwd=root, capture_output=True, text=True, check=False)
    except OSError:
        return "uncommitted/unknown"
    return head.stdout.strip() + ("+dirty" if status.stdout.strip() else "")
