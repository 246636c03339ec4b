"""Each generated results file records the settings it was made with, and still describes
today's default: a change to the config that moves one of them fails here, naming the file,
the settings and the command that makes the file again."""

import copy
import json
from pathlib import Path

import pytest
import recorded_settings_check

from nmtbench.workflow import recorded_settings

ROOT = Path(__file__).resolve().parents[2]
MADE_BY = {  # results file -> the command that makes it
    "results/tables.md": "snakemake --cores all",
    "results/multi30k.md": "snakemake --cores all --configfile config/multi30k.yaml, in a fresh "
                           "directory: its results/tables.md",
    "results/parity.md": "python benchmarks/parity/run.py",
    "results/parity-multi30k.md": "python benchmarks/parity/run.py --dataset multi30k",
    "results/benchmarks.md": "python benchmarks/speed.py (after the default)",
    "results/gpu.md": "python benchmarks/gpu.py (on a GPU: benchmarks/gpu_run.sh)",
    "results/gpu-host-overhead.md": "python benchmarks/gpu_host_overhead.py (on a GPU)",
}


# The GPU benchmarks time a fixed number of updates and decodes of weights they make, and save
# none: how a run stops, how long its warm-up is and which checkpoints it keeps and decodes do
# not change what an update or a search costs, so they do not make those files stale
TIMED_UPDATES = frozenset({
    "train.patience", "train.max_updates", "train.max_epochs", "train.warmup_updates",
    "train.keep_last_epochs", "train.keep_interval_updates", "decode.average_last",
    "decode.average_of", "decode.checkpoint"})
UNREAD = {"results/gpu.md": TIMED_UPDATES, "results/gpu-host-overhead.md": TIMED_UPDATES}


@pytest.mark.parametrize("name", MADE_BY)
def test_the_results_file_describes_todays_default(name):
    recorded = recorded_settings_check.read((ROOT / name).read_text(encoding="utf-8"))
    assert recorded, f"{name} records no settings (a '{recorded_settings.HEADING}' section)"
    changed = recorded_settings_check.differences(recorded, UNREAD.get(name, frozenset()))
    assert not changed, (f"{name} no longer describes today's default ("
                         + "; ".join(changed[:5]) + f"): make it again with {MADE_BY[name]}")


def test_a_setting_resolved_otherwise_is_named():
    recorded = recorded_settings.resolve(["config/config.yaml"], [("toy", "transformer-base")])
    assert recorded_settings_check.differences(recorded) == []
    stale = copy.deepcopy(recorded)
    stale["experiments"]["toy/transformer-base"]["train"]["lr"] = 0.003
    stale["experiments"]["toy/transformer-base"]["decode"]["beam"] = 4
    assert recorded_settings_check.differences(stale) == [
        "toy/transformer-base: train.lr was 0.003, now 0.002",
        "toy/transformer-base: decode.beam was 4, now 5"]


def test_the_section_reads_back_what_it_records():
    recorded = recorded_settings.resolve(["config/config.yaml"], [("toy", "abnet-mask-predict")])
    text = "\n".join(["# Some results", "", "| a |", "|---|", "",
                      *recorded_settings.markdown(recorded, "On top of them: 60 epochs.")])
    assert recorded_settings_check.read(text) == json.loads(json.dumps(recorded))
    assert recorded_settings_check.read("# Some results\n") is None
