"""``python -m jobsched.local [options]``: the same as ``jobsched local [options]``."""

from __future__ import annotations

import typer

from jobsched.local.command import local_command


def main() -> None:
    typer.run(local_command)


if __name__ == "__main__":
    main()
