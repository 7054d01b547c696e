"""The ``eosmirror`` console script: `eosmirror run <mirror> --server` takes a lean path (its start is
part of every served run, so it imports only what a served run needs); every
other command is the full command line, ``eosmirror.cliapp`` (its docstring lists the commands)."""

from __future__ import annotations

import sys
from typing import Any

from eosmirror.spark import runargs


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if runargs.served_command_line(args):
        from eosmirror.spark import serverclient

        return serverclient.main_run(args[1:])
    from eosmirror import cliapp

    return cliapp.main(args)


def build_parser() -> Any:
    from eosmirror import cliapp

    return cliapp.build_parser()


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["main", "build_parser"]
