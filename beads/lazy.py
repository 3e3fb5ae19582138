"""Lazy package attributes: a package names what it exports, and each loads on first use.

So `import beads` (or `inbox`, `mail`) stays cheap for a command, or a hook, that needs one
module of the package and not the heavy others.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def lazy_attributes(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports each name of `homes` from the module
    `homes[name]` when it is first asked for."""

    def __getattr__(name: str) -> Any:
        if name in homes:
            import importlib

            return getattr(importlib.import_module(homes[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
