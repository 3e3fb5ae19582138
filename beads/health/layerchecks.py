"""The checks `gc doctor` runs for the layers above the store, which register how.

Those layers keep files of their own under `.runtime/` (the delivery database, the origins
kept for reading commands); this layer names none of them. The program registers each
layer's check as the text `"module:function"` (`function(root)`, with the store's `.beads/`
directory, returns a list of `beads.health.problems.Problem`), and each cache derived from
git that `gc doctor --rebuild-index` removes with the index the same way (`function(root)`
removes it and returns what it did, lines for the report), imported only when doctor runs:
registering costs a command nothing.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from beads.health.problems import Problem

_checks: list[str] = []
_caches: list[str] = []


def register_check(spec: str) -> None:
    """Have every `gc doctor` run the check `spec`, "module:function" (idempotent)."""
    _register(_checks, spec)


def register_cache(spec: str) -> None:
    """Have `gc doctor --rebuild-index` run `spec`, "module:function", which removes a
    cache derived from git (idempotent)."""
    _register(_caches, spec)


def _register(specs: list[str], spec: str) -> None:
    module, sep, function = spec.partition(":")
    if not (module and sep and function):
        raise ValueError(f"a registration is 'module:function', not {spec!r}")
    if spec not in specs:
        specs.append(spec)


def run_checks(root: Path) -> list[Problem]:
    """What every registered check finds in the store `root`; a check that fails is a
    problem of its own (kind `check`), and the others still run."""
    found, failed = _run_each(_checks, root, "the check failed")
    return found + failed


def remove_caches(root: Path) -> tuple[list[str], list[Problem]]:
    """Remove every registered cache of the store `root`: what was done, and a problem
    (kind `check`) for each that could not be (the others are still removed)."""
    return _run_each(_caches, root, "not removed")


def _run_each(specs: list[str], root: Path, failing: str) -> tuple[list[Any], list[Problem]]:
    """Call each of `specs` ("module:function") on `root`: what they returned, joined, and a
    problem (kind `check`, its message starting with `failing`) for each that raised."""
    from beads.health.problems import Problem

    results: list[Any] = []
    failed: list[Problem] = []
    for spec in specs:
        module, _, function = spec.partition(":")
        try:
            results.extend(getattr(importlib.import_module(module), function)(root))
        except Exception as exc:  # noqa: BLE001 - said as a problem; the others still run
            failed.append(Problem("check", spec, f"{failing}: {type(exc).__name__}: {exc}"))
    return results, failed
