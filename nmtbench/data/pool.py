"""Work split into tasks over worker processes, results in task order.

A `multiprocessing.Pool` is never terminated here while tasks are in flight: `Pool.terminate()`
can hang for good when it races running tasks (cpython#78178, #96995, both open), which is what
stopping an `imap` early and leaving its `with Pool(...)` block does. Tasks go out in rounds of
`ROUND` per worker; the caller can stop only between rounds, when every worker is idle, and the
pool is then closed and joined (each worker takes its sentinel and exits).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from multiprocessing import Pool
from typing import TypeVar

Task = TypeVar("Task")
Result = TypeVar("Result")

ROUND = 4  # tasks per worker between two points where the caller may stop


def ordered_map(work: Callable[[Task], Result], tasks: Sequence[Task],
                workers: int) -> Iterator[Result]:
    """`map(work, tasks)` over `workers` processes (in this process when one is enough), lazily:
    a round of tasks runs only once the caller has taken the previous round's results. Close the
    iterator (or exhaust it) to release the processes."""
    if workers <= 1 or len(tasks) <= 1:
        yield from map(work, tasks)
        return
    pool = Pool(min(workers, len(tasks)))
    try:
        step = ROUND * workers
        for start in range(0, len(tasks), step):
            yield from pool.map(work, tasks[start : start + step])
    finally:
        pool.close()
        pool.join()
