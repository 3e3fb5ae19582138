"""The layers: `beads` < `inbox` < `mail` < `gates` < `web`, `mcpserver` < `gc_beads` (the
program). A module names no layer above its own (nor a peer of its own rank): no import, at
the top or inside a function, and no string that names such a layer's module (what
`importlib.import_module` or a "module:function" registration would load)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RANK = {"beads": 0, "inbox": 1, "mail": 2, "gates": 3, "web": 4, "mcpserver": 4, "gc_beads": 5}
# A whole string that is a module path or a "module:function" spec.
MODULE_TEXT = re.compile(r"[A-Za-z_]\w*(\.\w+)*(:\w+)?")


def _setting_names() -> set[str]:
    """Every setting's dotted key (synced, machine-local, guarded by trust) and each of its
    prefixes (`gates.destructive`): a setting's name, which may read like a module's
    (`mail.provider`), is not one."""
    import gc_beads.settings  # noqa: F401 - every layer's settings
    from beads.localconfig import LOCAL_KEYS
    from beads.settings import SETTINGS
    from beads.trust import GUARDED

    names = set()
    for key in [*SETTINGS, *LOCAL_KEYS, *GUARDED]:
        parts = key.split(".")
        names.update(".".join(parts[:n]) for n in range(2, len(parts) + 1))
    return names


SETTING_NAMES = _setting_names()


def names_module(text: str) -> bool:
    """Whether `text` ("a.b.c" or "a.b:function") names a module of this project: a
    "module:function" spec, or a dotted path one of whose prefixes is a module file or
    package here, and which is no setting's name."""
    if not MODULE_TEXT.fullmatch(text) or not ("." in text or ":" in text):
        return False
    if ":" in text:
        return True
    if text in SETTING_NAMES:
        return False
    parts = text.split(".")
    return any(
        (ROOT.joinpath(*parts[:n]).with_suffix(".py")).is_file()
        or (ROOT.joinpath(*parts[:n]) / "__init__.py").is_file()
        for n in range(2, len(parts) + 1)
    )


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of `tree` (prose, not names a program loads)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _group_names(tree: ast.AST) -> set[int]:
    """The ids of strings given as `group=` (an entry-point group: a registry's name that
    a higher layer fills, not a module this one loads)."""
    return {
        id(keyword.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg == "group" and isinstance(keyword.value, ast.Constant)
    }


def upward_names(layer: str, source: str) -> list[str]:
    """What `source`, a module of `layer`, names of a layer ranked at
    or above its own (other than itself): each as `import X`, `from X` or `"text"`."""
    tree = ast.parse(source)
    skipped = _docstrings(tree) | _group_names(tree)
    found = []

    def above(name: str) -> bool:
        top = name.split(".")[0].split(":")[0]
        return top in RANK and top != layer and RANK[top] >= RANK[layer]

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if above(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside this layer's package
                continue
            if node.module and above(node.module):
                found.append(f"from {node.module}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in skipped:
                continue
            text = node.value.strip()
            if above(text) and names_module(text):
                found.append(repr(text))
    return found


def test_no_module_names_a_layer_above_its_own() -> None:
    found = []
    checked = 0
    for layer in RANK:
        for path in sorted((ROOT / layer).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found += [f"{module}: {name}" for name in upward_names(layer, path.read_text())]
            checked += 1
    assert checked > 120  # every sub-folder too (beads/cli, inbox/nats, mail/threads, ...)
    assert found == []


def test_the_layer_check_finds_every_way_of_naming_a_layer_above() -> None:
    source = '''
"""A docstring may speak of mail.cli and gates:register."""
import json
from beads.store import Store
from . import sibling

def later():
    import mail.notify
    from gates.hooks import run_hook
    importlib.import_module("web.cli")
    arrivals.register("gc_beads.producers:announce_arrivals")
    entry_points(group="gc_beads.producers")
    message = "send mail to the gates"
    key = "gates.max_stop_blocks"  # a setting's name, not a module
    also_key = "mail.provider"
'''
    assert upward_names("inbox", source) == [
        "import mail.notify",
        "from gates.hooks",
        "'web.cli'",
        "'gc_beads.producers:announce_arrivals'",
    ]
    assert upward_names("gc_beads", source) == []
    assert upward_names("web", source) == ["'gc_beads.producers:announce_arrivals'"]
