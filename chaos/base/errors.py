"""Errors the user can act on. The CLI turns each into one line and an exit code."""


class AvailproofError(Exception):
    """Base class: a problem described in one line for the user."""

    exit_code = 2

    def __init__(self, message: str = ""):
        # one line, whatever the message was built from (a YAML error, a file name, user input)
        super().__init__(" ".join(str(message).split()))


class UsageError(AvailproofError):
    """Bad input: a file, an argument or a field (exit code 2)."""


class SetupError(AvailproofError):
    """The environment is not as needed: a missing binary, model, or unreachable cluster (exit 2)."""


class ClusterError(AvailproofError):
    """The cluster did something unexpected while we drove it (exit 2)."""


TRUE_WORDS = ("true", "1", "yes")
FALSE_WORDS = ("false", "0", "no")


def parse_bool(value, name: str, default: bool = False) -> bool:
    """A yes/no setting as the user gave it (experiment configuration, environment, a flag): a bool,
    0 or 1, or ``true/false/1/0/yes/no`` in any case; None (not given) is ``default``. Anything else is
    a one-line UsageError naming the setting (``bool("false")`` is True: never that)."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise UsageError(f"{name} must be true or false (true/false, 1/0, yes/no), got {value!r}")


def read_input(path, what: str) -> str:
    """The text of a user's input file, or a one-line UsageError naming it."""
    from pathlib import Path

    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read {what}: {getattr(e, 'strerror', None) or e}") from None


def yaml_problem(source, e: Exception) -> str:
    """A YAML parse error as one line naming ``source`` and the line."""
    mark = getattr(e, "problem_mark", None)
    where = f" line {mark.line + 1}" if mark else ""
    return f"{source}:{where} not valid YAML: {getattr(e, 'problem', None) or e}"


def read_yaml(path, what: str):
    """A user's YAML input file decoded, or a one-line UsageError naming it (and the line)."""
    import yaml

    text = read_input(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UsageError(yaml_problem(path, e)) from None
