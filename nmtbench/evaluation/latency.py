"""Decoding speed as AB-Net's Table 1 reports it: per-sentence latency at batch size 1 on the
test set, plus throughput at a large batch.

The first sentences warm the device up and are not counted; the median and 90th percentile of
the rest are reported with the hardware and thread count they were measured on. Absolute
times only compare on the same machine, so a run's speedup is measured against its table's
autoregressive baseline in the same job, on the same device: the two models decode each
sentence in turn (alternating which goes first), so load on a shared machine hits both alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from nmtbench import provenance
from nmtbench.devices import hardware_name
from nmtbench.errors import InputError
from nmtbench.evaluation.translate import load_run_model, search_settings, translate_lines
from nmtbench.fileio import read_lines, write_json
from nmtbench.workflow.decode_settings import DecodeSettings
from nmtbench.workflow.metric_registry import LATENCY_WARMUP as WARMUP


def per_item_ms(calls: Sequence[Callable[[Any], object]], items: Sequence[Any], warmup: int,
                clock: Callable[[], float] = time.perf_counter,
                sync: Callable[[], None] = lambda: None) -> list[list[float]]:
    """Time every call on every item, one item at a time; the first `warmup` items are run
    but not counted. Calls alternate order from item to item. Returns ms per call per item."""
    times: list[list[float]] = [[] for _ in calls]
    for i, item in enumerate(items):
        order = range(len(calls)) if i % 2 == 0 else reversed(range(len(calls)))
        for c in order:
            sync()
            start = clock()
            calls[c](item)
            sync()
            if i >= warmup:
                times[c].append((clock() - start) * 1000)
    return times


def summarize(times_ms: list[float]) -> dict[str, float]:
    """Median and 90th percentile (inclusive quantiles over the measured sentences)."""
    if not times_ms:
        raise ValueError("no measured sentences")
    p90 = statistics.quantiles(times_ms, n=10, method="inclusive")[-1] if len(times_ms) > 1 \
        else times_ms[0]
    return {"median": statistics.median(times_ms), "p90": p90}


class Decoder:
    """One trained run ready to translate, with the decoding settings it is measured under."""

    def __init__(self, run_dir: str | Path, settings: DecodeSettings, device: str):
        self.run_dir = str(run_dir)
        self.model, self.src_tok, self.tgt_tok, _ = load_run_model(
            run_dir, settings.checkpoint, settings.average_last, device, settings.average_of)
        self.search = search_settings(self.model, settings, run_dir)

    def __call__(self, lines: list[str], batch_size: int = 1) -> list[str]:
        return translate_lines(self.model, self.src_tok, self.tgt_tok, lines,
                               batch_size=batch_size, **self.search)

    def throughput(self, lines: list[str], batch_size: int, sync: Callable[[], None]) -> float:
        """Sentences per second translating `lines` in batches of `batch_size` (after a
        warm-up batch)."""
        self(lines[:batch_size], batch_size)
        sync()
        start = time.perf_counter()
        self(lines, batch_size)
        sync()
        return len(lines) / (time.perf_counter() - start)


def measure_latency(run_dir: str | Path, src_path: str | Path, out_path: str | Path, *,
                    sentences: int, throughput_batch: int, device: str = "auto",
                    settings: DecodeSettings, baseline_dir: str | Path | None = None,
                    baseline_settings: DecodeSettings | None = None) -> dict[str, Any]:
    """Latency of the run (and of the baseline run, for the speedup) on the first
    `sentences` test sentences after WARMUP more; write the JSON record to out_path."""
    lines = read_lines(src_path)
    if len(lines) < WARMUP + sentences:  # fewer timed would read as another measurement
        raise InputError(f"{src_path}: {len(lines)} lines, fewer than the {WARMUP} warm-up and "
                         f"{sentences} timed sentences asked for (--sentences: the workflow's "
                         "config key 'analysis.latency_sentences')")
    lines = lines[: WARMUP + sentences]
    decoders = [Decoder(run_dir, settings, device)]
    if baseline_dir is not None:
        decoders.append(Decoder(baseline_dir, baseline_settings or DecodeSettings(), device))
    dev = next(decoders[0].model.parameters()).device
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times = per_item_ms(decoders, [[line] for line in lines], WARMUP, sync=sync)
    measured = lines[WARMUP:]
    records = [{"run": d.run_dir, provenance.TRAINED: provenance.training_digest(d.run_dir),
                "decode": {"decoding": d.model.decoding, **d.search},
                "latency_ms": summarize(t),
                "throughput_sentences_per_s": d.throughput(measured, throughput_batch, sync)}
               for d, t in zip(decoders, times, strict=True)]
    result = {**records[0], "sentences": len(measured), "warmup_sentences": WARMUP,
              "batch_size": 1, "throughput_batch_size": throughput_batch,
              "device": hardware_name(dev), "threads": torch.get_num_threads()}
    if len(records) > 1:
        result["baseline"] = records[1]
        result["speedup"] = records[1]["latency_ms"]["median"] / records[0]["latency_ms"]["median"]
    write_json(out_path, result)
    return result
