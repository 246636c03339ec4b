"""Bad input to `python -m nmtbench`: every probe ends with one `error:` line on stderr and a
non-zero status, never a traceback (issue 17: each command line here once ended otherwise,
or ran on and gave a wrong result)."""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from tiny_checkpoints import save_tiny_bert

from nmtbench import cli, fileio
from nmtbench.devices import resolve_device
from nmtbench.errors import InputError
from nmtbench.evaluation import analysis

ROOT = Path(__file__).resolve().parents[2]
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (INFO|WARNING) ")

SUMMARY = {"params": {"total": 10, "trained": 10}, "seconds": 1.0, "steps": 1, "epochs": 1,
           "device": "cpu", "best_valid_loss": 5.0, "train_pairs": 2}
CONFIG = {"experiment": {"method": "transformer"}, "paths": {}}
WORLD = {"train_pairs": 5, "valid_pairs": 5, "test_pairs": 5, "mono_sentences": 5}


def error_line(result: subprocess.CompletedProcess, status: int = 2) -> str:
    """The one line a failed command printed (log lines aside), after checking it is one."""
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if not LOG_LINE.match(line)]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0].removeprefix("error: ")


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A run directory's JSON records, text files and broken versions of them, by name."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_summary.json").write_text(json.dumps(SUMMARY))
    (run / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "cut").mkdir()  # a run directory whose config.json a kill cut short
    (tmp_path / "cut" / "config.json").write_text(json.dumps(CONFIG)[:20])
    (tmp_path / "truncated.json").write_text(json.dumps(SUMMARY)[:30])
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "empty").write_text("")
    (tmp_path / "text").write_text("a b c\nd e\n")
    (tmp_path / "latin1").write_bytes(b"ok\ncaf\xe9 au lait\n")
    (tmp_path / "broken.yaml").write_text("seeds: [1\n")
    (tmp_path / "emptydir").mkdir()
    return tmp_path


def evaluate(d: Path, **changed: str) -> list[str]:
    options = {"summary": d / "run/train_summary.json", "run-config": d / "run/config.json",
               "hyp": d / "text", "ref": d / "text", "out": d / "metrics.json", **changed}
    return ["evaluate", "--split", "test",
            *[arg for key, value in options.items() for arg in (f"--{key}", str(value))]]


# (command line given the files' directory, the error line it must print)
PROBES: dict[str, tuple[Callable[[Path], list], str]] = {
    "score of two empty files": (
        lambda d: ["score", "--hyp", d / "empty", "--ref", d / "empty"],
        "{d}/empty and {d}/empty are empty: nothing to score"),
    "evaluate of two empty files": (
        lambda d: evaluate(d, hyp=d / "empty", ref=d / "empty"),
        "{d}/empty and {d}/empty are empty: nothing to score"),
    "evaluate, a truncated train_summary.json": (
        lambda d: evaluate(d, summary=d / "truncated.json"),
        "{d}/truncated.json: line 1: invalid JSON (Unterminated string starting at)"),
    "evaluate, a missing config.json": (
        lambda d: evaluate(d, **{"run-config": d / "run/missing.json"}),
        "{d}/run/missing.json: no such file"),
    "evaluate, a missing --info file": (
        lambda d: evaluate(d, info=d / "missing.json"), "{d}/missing.json: no such file"),
    "evaluate, --info not an object": (
        lambda d: evaluate(d, info=d / "list.json"), "{d}/list.json: not a JSON object"),
    "evaluate, a summary without params": (
        lambda d: evaluate(d, summary=d / "run/config.json"),
        "{d}/run/config.json: key 'params' is missing"),
    "evaluate, an unknown --detok-lang": (
        lambda d: [*evaluate(d), "--detok-lang", "english"],
        "python -m nmtbench evaluate: argument --detok-lang: invalid choice: 'english' "
        "(choose from 'as', "),
    "score, an unknown --detok-lang": (
        lambda d: ["score", "--hyp", d / "text", "--ref", d / "text", "--detok-lang", "EN"],
        "python -m nmtbench score: argument --detok-lang: invalid choice: 'EN' (choose from "),
    "decode, a missing run directory": (
        lambda d: ["decode", "--run-dir", d / "nowhere", "--src", d / "text", "--out",
                   d / "hyp"],
        "{d}/nowhere: no config.json; is this a trained run directory?"),
    "decode, a truncated config.json": (
        lambda d: ["decode", "--run-dir", d / "cut", "--src", d / "text", "--out", d / "hyp"],
        "{d}/cut/config.json: line 1: invalid JSON (Unterminated string starting at)"),
    "decode, an empty source": (
        lambda d: ["decode", "--run-dir", d / "run", "--src", d / "empty", "--out", d / "hyp"],
        "{d}/empty is empty: nothing to decode"),
    "latency, a baseline's beam not a number": (
        lambda d: ["latency", "--run-dir", d / "run", "--src", d / "text", "--out", d / "l.json",
                   "--baseline-run-dir", d / "run", "--baseline-decode", '{"beam": "x"}'],
        "--baseline-decode: key 'decode.beam': 'x' is not of type 'integer'"),
    "latency, a baseline's unknown setting": (
        lambda d: ["latency", "--run-dir", d / "run", "--src", d / "text", "--out", d / "l.json",
                   "--baseline-run-dir", d / "run", "--baseline-decode", '{"beams": 4}'],
        "--baseline-decode: key 'decode': Additional properties are not allowed ('beams' was "
        "unexpected)"),
    # a downloaded test set's size is known only in the job: fewer timed would be a record
    # the report leaves out as timed on another number of sentences
    "latency, more sentences than the source holds": (
        lambda d: ["latency", "--run-dir", d / "run", "--src", d / "text", "--out", d / "l.json",
                   "--sentences", "3"],
        "{d}/text: 2 lines, fewer than the 5 warm-up and 3 timed sentences asked for "
        "(--sentences: the workflow's config key 'analysis.latency_sentences')"),
    "decode, beam 0": (
        lambda d: ["decode", "--run-dir", d / "run", "--src", d / "text", "--out", d / "hyp",
                   "--beam", "0"],
        "python -m nmtbench decode: argument --beam: 0 is less than 1 (see --help)"),
    "decode, lenpen nan": (
        lambda d: ["decode", "--run-dir", d / "run", "--src", d / "text", "--out", d / "hyp",
                   "--lenpen", "nan"],
        "python -m nmtbench decode: argument --lenpen: nan is not a finite number (see --help)"),
    "a missing required option": (
        lambda d: ["score", "--hyp", d / "text"],
        "python -m nmtbench score: the following arguments are required: --ref (see --help)"),
    "tokenizer, non-UTF-8 training data": (
        lambda d: ["tokenizer", "--corpus", d / "text", d / "latin1", "--out", d / "tok",
                   "--vocab-size", "50"],
        "{d}/latin1:2: not valid UTF-8 (invalid continuation byte at byte 4)"),
    "train, --config not JSON": (
        lambda d: ["train", "--run-dir", d / "new", "--config", "{method: transformer}",
                   *[arg for k in ("train-src", "train-tgt", "valid-src", "valid-tgt",
                                   "src-tokenizer", "tgt-tokenizer")
                     for arg in (f"--{k}", d / "text")]],
        "--config: invalid JSON (Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1))"),
    "train, --config with NaN": (
        lambda d: ["train", "--run-dir", d / "new", "--config", '{"lr": NaN}',
                   *[arg for k in ("train-src", "train-tgt", "valid-src", "valid-tgt",
                                   "src-tokenizer", "tgt-tokenizer")
                     for arg in (f"--{k}", d / "text")]],
        "--config: invalid JSON (NaN is not a finite number)"),
    **{f"train, --config {config}": (
        lambda d, config=config: ["train", "--run-dir", d / "new", "--config", config,
                                  *[arg for k in ("train-src", "train-tgt", "valid-src",
                                                  "valid-tgt", "src-tokenizer", "tgt-tokenizer")
                                    for arg in (f"--{k}", d / "text")]],
        expected) for config, expected in (
        ('{"method": "transformer", "lr": "0.003"}',
         "--config: key 'run.lr': '0.003' is not of type 'number'"),
        ('{"method": "transformer", "lr": -0.1}',
         "--config: key 'run.lr': -0.1 is less than or equal to the minimum of 0"),
        ('{"method": "transformer", "lr": 1e300}',
         "--config: key 'run.lr': 1e+300 is greater than the maximum of 10"),
        ('{"method": "transformer", "warmup_init_lr": 1e300}',
         "--config: key 'run.warmup_init_lr': 1e+300 is greater than the maximum of 10"),
        ('{"method": "transformer", "lr": 1e999}',
         "--config: invalid JSON (1e999 is not a finite number)"),
        ('{"method": "transformer", "warmup_updates": 0}',
         "--config: key 'run.warmup_updates': 0 is less than the minimum of 1"),
        ('{"method": "transformer", "adam_betas": [0.9, 1.0]}',
         "--config: key 'run.adam_betas.1': 1.0 is greater than or equal to the maximum of 1"),
        ('{"method": "transformer", "seed": 99999999999999999999}',
         "--config: key 'run.seed': 99999999999999999999 is greater than the maximum of "
         "4294967295"),
        ('{"method": "transformer", "max_epochs": 2.5}',
         "--config: key 'run.max_epochs': 2.5 is not of type 'integer'"),
        ('{"method": "transformer", "lrr": 3}',
         "--config: key 'run.lrr' is not a setting of the trainer or of method 'transformer'"),
        ('{"method": "cmlm", "src_bert": "x"}',
         "--config: key 'run.src_bert' is not a setting of the trainer or of method 'cmlm'"),
        ('{"method": "transformer", "max_tokens": 10}',
         "--config: key 'run.max_tokens': max_tokens 10 is less than max_positions 256: a "
         "batch could not hold the longest pair the run keeps"),
        ('{"method": "transformer", "encoder_layers": 1.0}',
         "--config: key 'run.encoder_layers': 1.0 is not of type 'integer'"),
        ('{"method": ["transformer"]}',
         "--config: key 'method': ['transformer'] is not a method's name"),
        ('{"lr": 0.1}', "--config: key 'method' is missing"),
        ('{"method": "transformers"}', "--config: key 'method': unknown method 'transformers'"),
    )},
    **{f"toyworld, --world {world}": (
        lambda d, world=world: ["toyworld", "--out", d / "toy", "--world",
                                json.dumps({**WORLD, **world})],
        expected) for world, expected in (
        ({"train_pairs": -1},
         "--world: key 'world.train_pairs': -1 is less than the minimum of 1"),
        ({"train_pairs": 5.0},
         "--world: key 'world.train_pairs': 5.0 is not of type 'integer'"),
        ({"mono_sentences": 0},
         "--world: key 'world.mono_sentences': 0 is less than the minimum of 1"),
        ({"p_pp": 5}, "--world: key 'world.p_pp': 5 is greater than the maximum of 1"),
        ({"nouns": "many"}, "--world: key 'world.nouns': 'many' is not of type 'integer'"),
        ({"adjectives": 1}, "--world: key 'world.adjectives': 1 is less than the minimum of 2"),
        ({"seed": -3}, "--world: key 'world.seed': -3 is less than the minimum of 0"),
        ({"noun": 3}, "--world: key 'world': Additional properties are not allowed ('noun' "
                      "was unexpected)"),
        ({"min_target_tokens": 9, "max_target_tokens": 5},
         "--world: key 'min_target_tokens': 9 is more than max_target_tokens (5)"),
        ({"min_target_tokens": 500, "max_target_tokens": 600},
         "--world: keys 'min_target_tokens', 'max_target_tokens': no sentence of 500 to 600 "
         "target tokens in 10000 draws"),
        ({"train_pairs": 5000, "nouns": 1, "adjectives": 2, "intransitive_verbs": 1,
          "transitive_verbs": 1, "clausal_verbs": 1, "adverbs": 1, "p_relative": 0,
          "p_complement": 0, "p_pp": 0, "p_adverb": 0},
         "--world: key 'train_pairs': the world makes at most 1,640 distinct sentences of 3 "
         "to 60 target tokens, too few for 5,000 pairs (train)"),
    )},
    "toyworld, --world without sizes": (
        lambda d: ["toyworld", "--out", d / "toy", "--world", '{"seed": 1}'],
        "--world: the split sizes train_pairs, valid_pairs, test_pairs, mono_sentences are "
        "missing"),
    "toyworld, --world not an object": (
        lambda d: ["toyworld", "--out", d / "toy", "--world", "[1]"],
        "--world: expected a JSON object, got list"),
    "download, a malformed URL": (
        lambda d: ["download", "--url", "htp:/example.org/a.tgz", "--out", d / "a.tgz"],
        "{d}/a.tgz: malformed URL 'htp:/example.org/a.tgz' (expected http://, https:// or "
        "file:// and a host)"),
    "download, a directory as --out": (
        lambda d: ["download", "--url", f"file://{d}/text", "--out", d / "run"],
        "{d}/run: is a directory; --out names the file to write"),
    "download, a directory as file:// URL": (
        lambda d: ["download", "--url", f"file://{d}/run", "--out", d / "a.tgz"],
        "{d}/a.tgz: file://{d}/run is not a file"),
    "report, a results directory that does not exist": (
        lambda d: ["report", "--root", ROOT, "--results", d / "nowhere", "--out", d / "t.md",
                   "--configfile", ROOT / "config" / "smoke.yaml"],
        "{d}/nowhere: no such results directory"),
    "report, --config not an object": (
        lambda d: ["report", "--root", ROOT, "--results", d, "--config", "[]"],
        "--config: expected a JSON object, got list"),
    "params, a broken --configfile": (
        lambda d: ["params", "transformer-base", "--dataset", "toy", "--root", ROOT,
                   "--configfile", d / "broken.yaml"],
        "{d}/broken.yaml: line 2: invalid YAML (did not find expected ',' or ']')"),
    "snapshot, not a hub name": (
        lambda d: ["snapshot", "../../etc", "--out", d / "snap"],
        "checkpoint '../../etc' is not a hub name (NAME or ORGANISATION/NAME)"),
    "pretrain, no held-out sentences": (
        lambda d: ["pretrain", "--corpus", d / "text", "--tokenizer", d / "run", "--out",
                   d / "bert", "--settings", '{"model": "bert", "heldout_sentences": 0}'],
        "--settings: key 'settings.heldout_sentences': 0 is less than the minimum of 1"),
    # Hugging Face's own words would be about sentencepiece, or a JSON file
    "pretrain, an empty directory as --tokenizer": (
        lambda d: ["pretrain", "--corpus", d / "text", "--tokenizer", d / "emptydir", "--out",
                   d / "bert", "--settings", '{"model": "bert", "max_updates": 1}'],
        "{d}/emptydir: no tokenizer there (none of tokenizer_config.json, tokenizer.json, "
        "vocab.txt, vocab.json)"),
    "pretrain, a file as --tokenizer": (
        lambda d: ["pretrain", "--corpus", d / "text", "--tokenizer", d / "text", "--out",
                   d / "bert", "--settings", '{"model": "bert", "max_updates": 1}'],
        "{d}/text: a file; a tokenizer is a directory (or a hub name)"),
    "export, a negative --average-last": (
        lambda d: ["export", "--run-dir", d / "run", "--out", d / "hf", "--average-last", "-3"],
        "python -m nmtbench export: argument --average-last: -3 is less than 0"),
    "bootstrap, one resample": (
        lambda d: ["bootstrap", "--hyp", d / "text", "--baseline", d / "text", "--ref",
                   d / "text", "--out", d / "b.json", "--samples", "1"],
        "python -m nmtbench bootstrap: argument --samples: 1 is less than 10"),
    # counts a C int cannot hold (torch, tokenizers would overflow), an infinite length
    "decode, more threads than a C int holds": (
        lambda d: ["decode", "--run-dir", d / "run", "--src", d / "text", "--out", d / "hyp",
                   "--threads", "99999999999999"],
        "python -m nmtbench decode: argument --threads: 99999999999999 is more than "
        "2147483647"),
    "tokenizer, a vocabulary larger than a C int holds": (
        lambda d: ["tokenizer", "--corpus", d / "text", "--out", d / "tok", "--vocab-size",
                   "99999999999999999999999"],
        "python -m nmtbench tokenizer: argument --vocab-size: 99999999999999999999999 is more "
        "than 2147483647"),
    "decode, max_len_a 1e308": (
        lambda d: ["decode", "--run-dir", d / "run", "--src", d / "text", "--out", d / "hyp",
                   "--max-len-a", "1e308"],
        "python -m nmtbench decode: argument --max-len-a: 1e+308 is more than 1000"),
    "bootstrap, resamples for ever": (
        lambda d: ["bootstrap", "--hyp", d / "text", "--baseline", d / "text", "--ref",
                   d / "text", "--out", d / "b.json", "--samples", "99999999999999999999"],
        "python -m nmtbench bootstrap: argument --samples: 99999999999999999999 is more than "
        "100000"),
    "bootstrap of empty files": (
        lambda d: ["bootstrap", "--hyp", d / "empty", "--baseline", d / "empty", "--ref",
                   d / "empty", "--out", d / "b.json"],
        "{d}/empty, {d}/empty, {d}/empty are empty: nothing to compare"),
    "buckets, cutoffs that do not increase": (
        lambda d: ["buckets", "--hyp", d / "text", "--ref", d / "text", "--out", d / "b.json",
                   "--cutoffs", "20", "10"],
        "bucket cutoffs [20, 10]: each must be larger than the one before (compare-mt labels "
        "and fills the buckets in that order)"),
}


@pytest.mark.parametrize("probe", PROBES)
def test_bad_input_is_one_line(files: Path, probe: str, monkeypatch, capsys) -> None:
    """Each probe through `cli.main`, what `python -m nmtbench` runs, in this process (a
    traceback would fail the test here); a probe of each command also as a real process
    below."""
    command, expected = PROBES[probe]
    monkeypatch.chdir(ROOT)
    try:
        status = cli.main([*map(str, command(files))])
    except SystemExit as exit:  # argparse's own errors
        status = exit.code
    result = subprocess.CompletedProcess([], status, "", capsys.readouterr().err)
    assert error_line(result).startswith(expected.format(d=files))


FIRST_OF_EACH_COMMAND: dict[str, str] = {}
for _probe in PROBES:
    FIRST_OF_EACH_COMMAND.setdefault(PROBES[_probe][0](Path("d"))[0], _probe)


@pytest.mark.parametrize("probe", FIRST_OF_EACH_COMMAND.values())
def test_bad_input_is_one_line_from_a_real_process(files: Path, probe: str) -> None:
    command, expected = PROBES[probe]
    result = subprocess.run([sys.executable, "-m", "nmtbench", *map(str, command(files))],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert error_line(result).startswith(expected.format(d=files))


def test_a_full_disk_is_one_line_naming_what_was_written(tmp_path, monkeypatch, capsys):
    """ENOSPC from a write() names no file: the line says the disk is full and names the
    command's output; an OSError with a file names that file."""
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    (tmp_path / "text").write_text("a b\n")
    monkeypatch.setattr(analysis, "write_json", full)
    args = ["buckets", "--hyp", str(tmp_path / "text"), "--ref", str(tmp_path / "text"),
            "--out", str(tmp_path / "b.json"), "--cutoffs", "5"]
    assert cli.main(args) == 1
    assert capsys.readouterr().err == (f"error: No space left on device (the disk is full), "
                                       f"writing {tmp_path / 'b.json'}\n")

    def denied(path, data):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(analysis, "write_json", denied)
    assert cli.main(args) == 1
    assert capsys.readouterr().err == f"error: {tmp_path / 'b.json'}: Permission denied\n"


def _file_size_limit(limit: int) -> None:
    """A limit on the size of any file written (the shell's `ulimit -f`): writes past it fail
    as on a full disk, with EFBIG."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the process is killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def test_a_run_read_from_another_directory_says_where_to_run_from(tmp_path, monkeypatch,
                                                                 capsys):
    """A run's config.json records its paths relative to the workflow's directory: from
    elsewhere a tokenizer's path would be taken for a hub name (an unclear line)."""
    work = tmp_path / "work"
    run = work / "results" / "run"
    run.mkdir(parents=True)
    (work / "data" / "tok").mkdir(parents=True)
    paths = {key: "data/tok" for key in ("train_src", "train_tgt", "valid_src", "valid_tgt",
                                         "src_tokenizer", "tgt_tokenizer")}
    (run / "config.json").write_text(json.dumps({"experiment": {"method": "transformer"},
                                                 "paths": paths, "inputs": {}}))
    (tmp_path / "text").write_text("a b\n")
    monkeypatch.chdir(tmp_path)
    args = ["decode", "--run-dir", str(run), "--src", str(tmp_path / "text"), "--out",
            str(tmp_path / "hyp")]
    assert cli.main(args) == 2
    assert capsys.readouterr().err == (
        f"error: {run / 'config.json'}: it records 'data/tok', relative to the directory the "
        f"run was made in; run this command from {work}\n")


def test_no_room_for_a_temporary_file_is_one_line_naming_the_directory(tmp_path, monkeypatch):
    """Libraries call tempfile.gettempdir() on import; under a full disk or a file-size limit
    it says "No usable temporary directory" only: the line names the directory and why."""
    (tmp_path / "text").write_text("a b\n")
    result = subprocess.run(
        [sys.executable, "-m", "nmtbench", "buckets", "--hyp", str(tmp_path / "text"), "--ref",
         str(tmp_path / "text"), "--out", str(tmp_path / "b.json"), "--cutoffs", "5"],
        capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ,
                                                                    "TMPDIR": str(tmp_path)},
        preexec_fn=lambda: _file_size_limit(0))
    assert error_line(result, status=1) == (
        f"{tmp_path}: no temporary file can be written there (File too large: a file-size "
        "limit is set, ulimit -f); make room there or set TMPDIR to a directory with room")

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    found = fileio.temp_dir_failure(FileNotFoundError(
        errno.ENOENT, f"No usable temporary directory found in [{str(tmp_path)!r}]"))
    assert (found.filename, found.strerror) == (str(tmp_path), (
        "no temporary file can be written there (No space left on device: the disk is full); "
        "make room there or set TMPDIR to a directory with room"))
    assert not list(tmp_path.glob(".nmtbench-probe-*"))  # the probe is gone


def test_files_rust_libraries_cannot_write_are_one_line_naming_the_output(tmp_path):
    """safetensors and tokenizers report the OS's refusal in their own error types
    (save_pretrained in trim, pretrain, export; soft targets)."""
    save_tiny_bert(tmp_path / "bert")
    (tmp_path / "c.txt").write_text("w5 w6 w7\n")
    result = subprocess.run(
        [sys.executable, "-m", "nmtbench", "trim", "--checkpoint", str(tmp_path / "bert"),
         "--corpus", str(tmp_path / "c.txt"), "--size", "9", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        preexec_fn=lambda: _file_size_limit(2000))
    assert result.returncode == 1 and "Traceback" not in result.stderr  # beside load bars:
    assert result.stderr.splitlines()[-1] == f"error: {tmp_path / 'out'}: File too large"
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_torch_cannot_write_is_an_os_error_naming_it(tmp_path):
    """torch.save reports a refused write as a RuntimeError of its archive writer."""
    from nmtbench.parts.checkpoints import save

    script = ("import resource, signal, sys, torch\n"
              "from nmtbench.parts.checkpoints import save\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, resource.RLIM_INFINITY))\n"
              "try:\n"
              "    save(sys.argv[1], {'w': torch.ones(100000)})\n"
              "except OSError as err:\n"
              "    print(err.filename, '|', err.strerror)\n")
    out = tmp_path / "last.pt"
    result = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True,
                            text=True, cwd=ROOT, timeout=300)
    assert result.stdout == f"{out} | torch could not write it (is the disk full?)\n", result.stderr
    assert not out.exists()
    save(out, {"w": torch.ones(3)})  # without the limit it writes
    assert out.is_file()


@pytest.mark.parametrize("name, message", [
    ("gpu", "unknown device 'gpu': use auto, cpu, cuda or cuda:N"),
    ("cuda:x", "unknown device 'cuda:x': use auto, cpu, cuda or cuda:N"),
    ("meta", "unknown device 'meta': use auto, cpu, cuda or cuda:N"),
])
def test_an_unknown_device_is_an_input_error(name: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        resolve_device(name)
    assert str(err.value) == message


DEVICE_COMMANDS = {  # every command taking --device, given the files' directory
    "train": lambda d: ["train", "--run-dir", d / "new", "--config", '{"method": "transformer"}',
                        *[arg for k in ("train-src", "train-tgt", "valid-src", "valid-tgt",
                                        "src-tokenizer", "tgt-tokenizer")
                          for arg in (f"--{k}", d / "text")]],
    "decode": lambda d: ["decode", "--run-dir", d / "run", "--src", d / "text", "--out",
                         d / "hyp"],
    "latency": lambda d: ["latency", "--run-dir", d / "run", "--src", d / "text", "--out",
                          d / "l.json", "--sentences", "1"],
    "soft-targets": lambda d: ["soft-targets", "--run-dir", d / "run", "--out", d / "s.st",
                               *[arg for k in ("train-src", "train-tgt", "valid-src",
                                               "valid-tgt") for arg in (f"--{k}", d / "text")]],
}


@pytest.mark.parametrize("command", DEVICE_COMMANDS)
def test_a_gpu_the_host_lacks_is_one_line_naming_the_key(files, command, monkeypatch, capsys):
    """The workflow plans where there may be no GPU, so `device: cuda:7` is found by the job:
    one line naming the option, the config key and what the host has, before any work."""
    import torch

    (files / "text").write_text("a b c\n" * 8)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    args = [*map(str, DEVICE_COMMANDS[command](files)), "--device", "cuda:7"]
    error = "error: device 'cuda:7' (--device; in the workflow, config key 'device'): this host"
    assert cli.main(args) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"{error} has no CUDA GPU that torch " \
        "can use; use cpu or auto"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert cli.main(args) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"{error} has 2 GPU(s), cuda:0, cuda:1"


def test_the_cli_refuses_the_resamples_the_config_refuses() -> None:
    """`bootstrap --samples` has the config's range (analysis.bootstrap_samples)."""
    import argparse

    from nmtbench.workflow.yaml_reader import load_yaml

    schema = load_yaml((ROOT / "config" / "schema.yaml").read_text())
    samples = schema["properties"]["analysis"]["properties"]["bootstrap_samples"]
    least, most = samples["minimum"], samples["maximum"]
    assert cli.BOOTSTRAP_SAMPLES(str(least)) == least
    assert cli.BOOTSTRAP_SAMPLES(str(most)) == most
    for refused in (least - 1, most + 1):
        with pytest.raises(argparse.ArgumentTypeError):
            cli.BOOTSTRAP_SAMPLES(str(refused))


def test_ctrl_c_is_one_line(tmp_path) -> None:
    """SIGINT while a command waits on its input (a FIFO whose writer sends nothing) ends it
    with one line and status 130, not a KeyboardInterrupt traceback."""
    import time

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    process = subprocess.Popen([sys.executable, "-m", "nmtbench", "score", "--hyp", str(fifo),
                                "--ref", str(fifo)], cwd=ROOT, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.monotonic() + 120
    while True:  # the FIFO opens for writing once the command has it open to read
        try:
            writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as err:
            assert err.errno == errno.ENXIO and time.monotonic() < deadline
            time.sleep(0.1)
    try:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        os.close(writer)
    result = subprocess.CompletedProcess([], process.returncode, "", stderr)
    assert error_line(result, status=130) == "interrupted (Ctrl-C)"
