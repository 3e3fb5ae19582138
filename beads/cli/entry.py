"""The `gc` program's entry point.

A few exact argument lists are served without click: Claude Code runs `gc hook run` on every
prompt and every stop, and importing click alone costs about as much as the hook's own work.
Every other command line, and `gc hook run` with any option, goes through the click CLI of
`beads.cli.main`. The table names modules of higher layers as data, never as imports.
"""

from __future__ import annotations

import importlib
import sys

# exact arguments -> (module, function returning the exit code)
DIRECT: dict[tuple[str, ...], tuple[str, str]] = {
    ("hook", "run"): ("gates.hooks", "main"),
}


def main() -> None:
    """Run `gc`."""
    from beads import files

    files.own_umask = True  # a program of our own: its umask may follow the store's modes
    direct = DIRECT.get(tuple(sys.argv[1:]))
    if direct is not None:
        module, function = direct
        try:
            code = getattr(importlib.import_module(module), function)()
        except KeyboardInterrupt:
            code = 130  # interrupted: quietly, as the click CLI does
        sys.exit(code)
    from beads.cli.main import main as click_main

    click_main()


if __name__ == "__main__":
    main()
