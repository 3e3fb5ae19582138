"""The layers: `beads` < `inbox` < `mail` < `gates` < `web`, `mcpserver` < `gc_beads` (the
program). A module names no layer above its own (nor a peer of its own rank): no import, at
the top or inside a function, and no string that names such a layer's module (what
`importlib.import_module` or a "module:function" registration would load)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from tests.conftest import syntax_nodes

ROOT = Path(__file__).resolve().parent.parent
RANK = {"beads": 0, "inbox": 1, "mail": 2, "gates": 3, "web": 4, "mcpserver": 4, "gc_beads": 5}
# A whole string that is a module path or a "module:function" spec.
MODULE_TEXT = re.compile(r"[A-Za-z_]\w*(\.\w+)*(:\w+)?")


def _setting_names() -> set[str]:
    """Every setting's dotted key (synced, machine-local, guarded by trust) and each of its
    prefixes (`gates.destructive`): a setting's name, which may read like a module's
    (`mail.provider`), is not one."""
    import gc_beads.settings  # noqa: F401 - every layer's settings
    from beads.settings.localconfig import LOCAL_KEYS
    from beads.settings.registry import SETTINGS
    from beads.settings.trust import GUARDED

    names = set()
    for key in [*SETTINGS, *LOCAL_KEYS, *GUARDED]:
        parts = key.split(".")
        names.update(".".join(parts[:n]) for n in range(2, len(parts) + 1))
    return names


SETTING_NAMES = _setting_names()


@functools.cache
def module_nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the module at `path`: each file is parsed and walked once a session,
    whichever checks read it (walking the whole project's trees is most of their cost)."""
    return syntax_nodes(path.read_text())


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


def _docstrings(nodes: tuple[ast.AST, ...]) -> set[int]:
    """The ids of the docstring nodes among `nodes` (prose, not names a program loads)."""
    found = set()
    for node in nodes:
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _group_names(nodes: tuple[ast.AST, ...]) -> set[int]:
    """The ids of strings given as `group=` (an entry-point group: a registry's name that
    a higher layer fills, not a module this one loads)."""
    return {
        id(keyword.value)
        for node in nodes
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg == "group" and isinstance(keyword.value, ast.Constant)
    }


def upward_names(layer: str, source: str) -> list[str]:
    """What `source`, a module of `layer`, names of a layer ranked at
    or above its own (other than itself): each as `import X`, `from X` or `"text"`."""
    return upward_names_in(layer, syntax_nodes(source))


def upward_names_in(layer: str, nodes: tuple[ast.AST, ...]) -> list[str]:
    """`upward_names` of a module given as every node of its tree."""
    skipped: set[int] | None = None  # docstrings and group names, found once a string needs it
    found = []

    def above(name: str) -> bool:
        top = name.split(".")[0].split(":")[0]
        return top in RANK and top != layer and RANK[top] >= RANK[layer]

    for node in nodes:
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if above(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: inside this layer's package
                continue
            if node.module and above(node.module):
                found.append(f"from {node.module}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.strip()
            if above(text) and names_module(text):
                if skipped is None:
                    skipped = _docstrings(nodes) | _group_names(nodes)
                if id(node) not in skipped:
                    found.append(repr(text))
    return found


@pytest.mark.slow
def test_no_module_names_a_layer_above_its_own() -> None:
    found = []
    checked = 0
    for layer in RANK:
        for path in sorted((ROOT / layer).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found += [f"{module}: {name}" for name in upward_names_in(layer, module_nodes(path))]
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


PACKAGES = ["beads", "inbox", "mail", "gates", "web", "mcpserver", "gc_beads"]


def _modules() -> dict[str, Path]:
    """Every module of the project, by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _loaded_strings(nodes: tuple[ast.AST, ...]) -> list[str]:
    """The strings `tree` hands to the import machinery of its own process: the argument of
    `import_module(...)`, a "module:function" spec, and a lazy table's values (a dict's
    string values, as `beads.lazy` takes them). A `python -m module` argument is another
    process's import, not one of this module's."""
    texts = []
    for node in nodes:
        called = getattr(node, "func", None)
        if getattr(called, "attr", getattr(called, "id", None)) == "import_module":
            texts += [a.value for a in node.args if isinstance(a, ast.Constant)]
        elif isinstance(node, ast.Dict):
            texts += [v.value for v in node.values if isinstance(v, ast.Constant)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value:
            texts.append(node.value)
    return [text.strip().split(":")[0] for text in texts if isinstance(text, str)]


def import_edges(module: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The modules of the project `module` imports, each with the line of its first import:
    at the top, inside functions and under TYPE_CHECKING alike. `from pkg import name` is an
    edge to `pkg.name` when that is a module, else to `pkg`."""
    nodes = module_nodes(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    edges: dict[str, int] = {}

    def add(name: str | None, line: int) -> None:
        while name and name not in modules:  # `import a.b.c` of a name inside a.b: a.b
            name = name.rpartition(".")[0]
        if name and name != module:
            edges.setdefault(name, line)

    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package[: len(package) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in modules else base, node.lineno)
    for text in _loaded_strings(nodes):
        if text in modules:
            add(text, 0)
    return edges


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle of `graph` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


@functools.cache
def project_graph() -> dict[str, dict[str, int]]:
    """Every module of the project with the modules it imports (`import_edges`)."""
    modules = _modules()
    return {name: import_edges(name, path, modules) for name, path in modules.items()}


def test_no_import_circle_anywhere_in_the_project() -> None:
    graph = project_graph()
    assert sum(len(edges) for edges in graph.values()) > 500  # the whole project was read
    cycle = find_cycle(graph)
    steps = zip(cycle or [], (cycle or [])[1:], strict=False)
    shown = " -> ".join(f"{a} (line {graph[a][b]})" for a, b in steps)
    assert cycle is None, f"import circle: {shown} -> {cycle[-1]}"


def test_the_cycle_check_sees_imports_inside_functions_type_checking_and_strings(
    tmp_path: Path,
) -> None:
    sources = {
        "pkg/__init__.py": 'LAZY = {"Thing": "pkg.lazyone"}\n',
        "pkg/a.py": "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "pkg/b.py": "def later():\n    from pkg import c\n",
        "pkg/c.py": 'import importlib\nimportlib.import_module("pkg.a")\n',
        "pkg/lazyone.py": 'argv = ["python", "-m", "pkg"]\n',
    }
    modules = {}
    for name, text in sources.items():
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        parts = Path(name).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {name: import_edges(name, path, modules) for name, path in modules.items()}
    assert graph["pkg"] == {"pkg.lazyone": 0}
    assert graph["pkg.lazyone"] == {}  # another process's import
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    del graph["pkg.c"]["pkg.a"]
    assert find_cycle(graph) is None


# The old paths of moved modules that docs and users import: each still imports, and warns.
OLD_PATHS = {
    "beads.config": "beads.settings.config",
    "beads.record": "beads.records.record",
    "beads.codec": "beads.records.codec",
    "beads.ids": "beads.records.ids",
    "beads.query": "beads.index.query",
}


def test_an_old_module_path_imports_the_moved_module_with_a_deprecation_warning() -> None:
    import subprocess
    import sys

    # One fresh process imports each old path in turn (none imports another: the test below),
    # so each one's own import is the first and must warn.
    code = (
        "import importlib, sys, warnings\n"
        "for old, new in (pair.split('=') for pair in sys.argv[1:]):\n"
        "    with warnings.catch_warnings(record=True) as seen:\n"
        "        warnings.simplefilter('always')\n"
        "        module = importlib.import_module(old)\n"
        "    assert module is importlib.import_module(new), (old, module)\n"
        "    assert [w.category.__name__ for w in seen] == ['DeprecationWarning'], (old, seen)\n"
        "    assert new in str(seen[0].message), (old, seen)\n"
        "    print(old)\n"
    )
    pairs = [f"{old}={new}" for old, new in OLD_PATHS.items()]
    result = subprocess.run([sys.executable, "-c", code, *pairs], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == list(OLD_PATHS)


def test_no_module_of_the_project_imports_an_old_path() -> None:
    found = [
        f"{name} imports {target}"
        for name, edges in project_graph().items()
        if name not in OLD_PATHS
        for target in edges
        if target in OLD_PATHS
    ]
    assert found == []
