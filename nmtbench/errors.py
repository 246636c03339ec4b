"""One exception type for bad user input; the CLI prints it as a single line."""


class InputError(Exception):
    """Bad input (config key, data file, checkpoint) described in one line naming what is wrong."""
