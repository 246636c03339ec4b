"""Fixtures of the methods' tests."""

from pathlib import Path

import pytest

from nmtbench.workflow import config as nmtconfig

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def paper_plan():
    """The plan of config/paper.yaml (on config/config.yaml): the papers' own experiments,
    whose parameter counts the tests hold against the papers' tables."""
    cfg = nmtconfig.load_config([ROOT / "config" / "config.yaml", ROOT / "config" / "paper.yaml"])
    return nmtconfig.check(cfg, ROOT / "config" / "schema.yaml", ROOT / "papers")
