"""One workflow runs jobs in a working directory at a time.

A second `snakemake` there would rerun the first's running jobs (they look incomplete) and
delete their fresh outputs. The lock is an OS lock on a file under `.snakemake/`, which the
kernel releases when its process dies, even by `kill -9`: Snakemake's own lock survives a
kill and blocks every later run, so `profiles/default` turns it off. The functions live here,
not in a rules file, so that an error Snakemake raises through the wrapped methods is not
reported as a line of the workflow's rules.
"""

from __future__ import annotations

import fcntl
import os
import sys
from typing import IO, Any

WORKFLOW_LOCK = ".snakemake/nmtbench-workflow.lock"
_HELD: list[IO[str]] = []  # the open lock file, held while this invocation runs jobs here


def hold() -> None:
    """Take the lock of the current directory, or stop with one line naming its holder."""
    if _HELD:
        return
    try:
        os.makedirs(os.path.dirname(WORKFLOW_LOCK), exist_ok=True)
        lock = open(WORKFLOW_LOCK, "a+")  # held open until the process ends
    except OSError as err:  # a directory of that name, say: no lock, so no jobs
        sys.exit(f"error: cannot open the workflow's lock {os.path.abspath(WORKFLOW_LOCK)} "
                 f"({err.strerror}); delete it if it is not a file")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.readline().strip() or "?"
        sys.exit(f"error: another workflow (process {holder}) is running jobs in "
                 f"{os.getcwd()}; wait for it to end, or stop it")
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    _HELD.append(lock)


def _dry_execution(*args: Any, **kwargs: Any) -> bool:
    plugin = kwargs.get("executor_plugin", args[0] if args else None)
    return bool(getattr(getattr(plugin, "common_settings", None), "dryrun_exec", False))


def _dry_deletion(*args: Any, **kwargs: Any) -> bool:
    return bool(kwargs.get("dryrun", args[1] if len(args) > 1 else False))


def lock_before_executing(workflow: Any) -> None:
    """Take the lock before Snakemake executes the DAG or deletes its outputs
    (`--delete-all-output`, `--delete-temp-output`), not in a dry run, by wrapping
    `Workflow.execute` and `Workflow.delete_output` (Snakemake 9): `onstart` alone leaves it
    to the hooks, which `--no-hooks` turns off, and never runs for a deletion. Cluster jobs
    (not the main process) take none: their invocation holds it."""
    if not workflow.is_main_process:
        return
    for name, dry in (("execute", _dry_execution), ("delete_output", _dry_deletion)):
        method = getattr(workflow, name, None)
        if method is None:
            continue

        def locked(*args: Any, method: Any = method, dry: Any = dry, **kwargs: Any) -> Any:
            if not dry(*args, **kwargs):
                hold()
            return method(*args, **kwargs)

        setattr(workflow, name, locked)
