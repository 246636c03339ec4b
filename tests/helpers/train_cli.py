"""`python -m nmtbench train`'s arguments for a run's paths, as the train rule writes them."""

from __future__ import annotations

from nmtbench.run_paths import RunPaths


def train_arguments(paths: RunPaths) -> list[str]:
    record = paths.as_record()
    pretrained, inputs = record.pop("pretrained"), record.pop("inputs")
    return [*(f"--{key.replace('_', '-')}={value}" for key, value in record.items()),
            *(f"--pretrained={role}={path}" for role, path in pretrained.items()),
            *(f"--input={name}={path}" for name, path in inputs.items())]
