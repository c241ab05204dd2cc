"""`availproof`: argument parsing and wiring only; the work is done by the modules it calls.

The parser is :mod:`chaos.commands.parser`; the commands are grouped in :mod:`chaos.commands`: the local
cluster's (``cluster``), those that run experiments (``runs``) and those that read what runs left (``results``).

Exit codes: 0 success, 1 a bound was violated, 2 a usage or set-up error (one line on stderr).
"""

from __future__ import annotations

import sys

from chaos.commands.common import say
from chaos.commands.parser import build_parser
from chaos.base.errors import AvailproofError


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse prints its own one-line usage error
        return 2 if e.code else 0
    try:
        return args.func(args)
    except AvailproofError as e:
        say(f"error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        say("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
