"""The checks `gc doctor` runs for the layers above the store, which register how.

Those layers keep files of their own under `.runtime/` (the delivery database); this layer
names none of them. The program registers each layer's check as the text
`"module:function"` (`function(root)`, with the store's `.beads/` directory, returns a list
of `beads.health.problems.Problem`), imported only when doctor runs: registering costs a
command nothing.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from beads.health.problems import Problem

_checks: list[str] = []


def register_check(spec: str) -> None:
    """Have every `gc doctor` run the check `spec`, "module:function" (idempotent)."""
    module, sep, function = spec.partition(":")
    if not (module and sep and function):
        raise ValueError(f"a check is 'module:function', not {spec!r}")
    if spec not in _checks:
        _checks.append(spec)


def run_checks(root: Path) -> list[Problem]:
    """What every registered check finds in the store `root`; a check that fails is a
    problem of its own (kind `check`), and the others still run."""
    from beads.health.problems import Problem

    found: list[Problem] = []
    for spec in _checks:
        module, _, function = spec.partition(":")
        try:
            found.extend(getattr(importlib.import_module(module), function)(root))
        except Exception as exc:  # noqa: BLE001 - said as a problem; the report goes on
            found.append(Problem("check", spec, f"the check failed: {type(exc).__name__}: {exc}"))
    return found
