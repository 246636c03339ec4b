"""A stand-in for conda where the machine has none: it answers what snakemake asks before a
dry run with --use-conda (version, platform, channel settings). A dry run creates no
environment, so nothing else of conda is used."""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path


def environment_with_conda(tmp_path: Path) -> dict[str, str]:
    """os.environ, with the stand-in first on PATH unless a real conda is there."""
    env = dict(os.environ)
    if shutil.which("conda") is not None:
        return env
    shim = tmp_path / "bin" / "conda"
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.write_text(textwrap.dedent("""\
        #!/bin/sh
        case "$1" in
          --version) echo "conda 25.1.1";;
          info) echo '{"platform": "linux-64", "conda_prefix": "/opt/conda"}';;
          config) echo '{"get": {}}';;
          *) exit 1;;
        esac
    """))
    shim.chmod(0o755)
    env["PATH"] = f"{shim.parent}:{env['PATH']}"
    return env
