"""One exception type for bad user input; the CLI prints it as a single line."""


class InputError(Exception):
    """Bad input (config key, data file, checkpoint) described in one line naming what is wrong."""


class TooLong(InputError):
    """A sequence longer than a model's positions (`limit`); decoding names its line."""

    def __init__(self, length: int, limit: int):
        super().__init__(f"{length} positions, more than the model's {limit} (max_positions)")
        self.limit = limit


def schema_key(error) -> str:
    """The dotted key a jsonschema ValidationError is about ("(top level)" for the root)."""
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def invalid_yaml(path, err) -> InputError:
    """A yaml.YAMLError as one line naming the file and, where PyYAML knows it, the line."""
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}: " if mark else ""
    return InputError(f"{path}: {where}invalid YAML ({getattr(err, 'problem', err)})")


def one_line(err: Exception) -> str:
    """A library's error message on one line (Hugging Face's often run over several)."""
    return " ".join(str(err).split())


def retrain(run_dir) -> str:
    """The advice of every refusal that only training a run again can fix: deleting the run
    directory makes the workflow train it and remake what depends on it (a file inside it, such
    as last.pt, is no declared output: Snakemake would not notice it gone)."""
    return f"delete {run_dir} to train it again"
