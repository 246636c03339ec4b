"""nmtbench: the core library behind the workflow (data, training, decoding, metrics, report)."""

__version__ = "0.1.0"
