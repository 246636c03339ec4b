"""ordered_map: results in task order; a round runs only when the caller asks for it, so a caller
that stops early leaves no task running and no worker process behind (a Pool terminated with
tasks in flight can hang for good, cpython#78178)."""

import multiprocessing
import os
from functools import partial
from pathlib import Path

import pytest

from nmtbench.data import pool
from nmtbench.data.pool import ordered_map


def square_and_mark(task: int, folder: Path) -> tuple[int, int]:
    (folder / str(task)).touch()
    if task == 13:
        raise ValueError("task 13 fails")
    return task * task, os.getpid()


@pytest.fixture
def one_task_per_worker_a_round(monkeypatch):
    monkeypatch.setattr(pool, "ROUND", 1)


def ran(folder: Path) -> set[int]:
    return {int(path.name) for path in folder.iterdir()}


@pytest.mark.usefixtures("one_task_per_worker_a_round")
def test_results_come_in_task_order_across_rounds(tmp_path):
    results = list(ordered_map(partial(square_and_mark, folder=tmp_path), range(9), workers=2))
    assert [square for square, _ in results] == [i * i for i in range(9)]
    assert os.getpid() not in {pid for _, pid in results}
    assert ran(tmp_path) == set(range(9))
    assert multiprocessing.active_children() == []


@pytest.mark.usefixtures("one_task_per_worker_a_round")
def test_stopping_early_runs_no_further_round_and_releases_the_workers(tmp_path):
    results = ordered_map(partial(square_and_mark, folder=tmp_path), range(10), workers=2)
    assert next(results)[0] == 0
    assert len(multiprocessing.active_children()) == 2
    results.close()
    assert multiprocessing.active_children() == []
    assert ran(tmp_path) == {0, 1}  # the first round only: two workers, one task each


@pytest.mark.usefixtures("one_task_per_worker_a_round")
def test_a_failing_task_raises_and_releases_the_workers(tmp_path):
    with pytest.raises(ValueError, match="task 13 fails"):
        list(ordered_map(partial(square_and_mark, folder=tmp_path), range(12, 20), workers=2))
    assert multiprocessing.active_children() == []
    assert ran(tmp_path) == {12, 13}


@pytest.mark.parametrize(("workers", "tasks"), [(1, range(3)), (4, range(1)), (2, range(0))])
def test_one_worker_or_one_task_runs_here(tmp_path, workers, tasks):
    results = list(ordered_map(partial(square_and_mark, folder=tmp_path), tasks, workers))
    assert results == [(i * i, os.getpid()) for i in tasks]
