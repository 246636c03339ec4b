"""Choosing the device a job runs on, and naming the hardware in results (torch is imported
where a device is resolved: the report names the CPU without it)."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import TYPE_CHECKING

from nmtbench.errors import InputError

if TYPE_CHECKING:
    import torch


def resolve_device(name: str) -> torch.device:
    """`auto` is CUDA when present, else CPU; asking for CUDA without it (or for a GPU this
    machine does not have, or a device torch does not know) is an error."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise InputError(f"unknown device {name!r}: use auto, cpu, cuda or cuda:N")
    if device.type == "cuda":
        # the workflow plans on a login node that may have no GPU: its jobs find out here
        asked = f"device {name!r} (--device; in the workflow, config key 'device')"
        if not torch.cuda.is_available():
            raise InputError(f"{asked}: this host has no CUDA GPU that torch can use; use cpu "
                             "or auto")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise InputError(f"{asked}: this host has {count} GPU(s), "
                             f"{', '.join(f'cuda:{i}' for i in range(count))}")
    return device


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def hardware_name(device: torch.device) -> str:
    """The GPU model for CUDA devices, else "cpu" (the report adds the CPU model)."""
    import torch

    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def gpu_model() -> str:
    """This machine's first GPU, or "none" (torch imported here: the report loads it only as
    it writes the provenance block)."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"


def autocast(device: torch.device):
    """bf16 autocast on CUDA (training and validation); nothing on CPU."""
    import torch

    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
