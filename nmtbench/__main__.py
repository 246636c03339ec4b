"""`python -m nmtbench`. A Ctrl-C (SIGINT) ends a command with one line and status 130, as a
shell reports a job it interrupted, also while it imports its libraries: what it was writing
is a temporary file, removed, never renamed into place (fileio.atomic_path), and a training
resumes from its last checkpoint."""

import sys

try:
    from nmtbench.cli import main

    status = main()
except KeyboardInterrupt:
    print("error: interrupted (Ctrl-C)", file=sys.stderr)
    status = 130
raise SystemExit(status)
