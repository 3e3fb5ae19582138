"""What CI runs: the README's test command, hypothesis's `ci` profile, the declared floors."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import subprocess
import sys
import tomllib
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import CodeType
from typing import Any

import pytest
from hypothesis import settings

from tests.conftest import GcRunner, syntax_nodes

ROOT = Path(__file__).resolve().parent.parent
SPEC = re.compile(r"^([A-Za-z0-9_.-]+)>=([^,;\s]+)")


def declared_floors() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    floors = {}
    for spec in specs:
        found = SPEC.match(spec)
        assert found, f"{spec!r} has no floor (name>=version)"
        floors[found[1].lower()] = found[2]
    return floors


def test_ci_runs_the_suite_on_exactly_the_declared_floors() -> None:
    pinned = {}
    for line in (ROOT / ".ci" / "floors.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pinned[name.strip().lower()] = version.strip()
    assert pinned == declared_floors()
    assert "floors.txt" in (ROOT / ".ci" / "run").read_text()


def test_ci_runs_the_readmes_test_command_with_the_ci_profile() -> None:
    readme = (ROOT / "README.md").read_text()
    test_command = readme.split("**2. Run the tests.**")[1].split("```")[1].strip()
    assert test_command == "./test.sh"
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in lines  # verbatim
    for variable, value in (("HYPOTHESIS_PROFILE", "ci"), ("CI", "true")):
        export = next(n for n, line in enumerate(lines) if line.startswith(f"export {variable}="))
        assert lines[export].split("=")[1].split()[0] == value
        assert export < lines.index(test_command)
    assert settings.get_profile("ci").max_examples > settings.get_profile("default").max_examples


# -- dulwich's public API only, and the one door to git ------------------------------------

SOURCES = ("beads", "inbox", "mail", "gates", "web", "bench", "tests")


def project_files() -> list[Path]:
    return sorted(path for top in SOURCES for path in (ROOT / top).rglob("*.py"))


@functools.cache
def dulwich_private_names() -> frozenset[str]:
    """Every `_name` dulwich defines: functions, classes, methods, attributes, variables and
    arguments, modules.

    Read from the code objects of its modules (each name its code loads, stores or defines),
    which Python's bytecode cache holds ready where it is current; a superset of the names
    of their syntax trees (it adds imported and name-mangled names), at a small part of the
    cost of parsing three megabytes of source and walking the trees."""
    import dulwich

    names: set[str] = set()
    for path in Path(dulwich.__file__).parent.rglob("*"):
        if path.name.startswith("_") and not path.name.startswith("__"):
            names.add(path.name.split(".")[0])  # a private module (`_pack`, `_objects`)
        if path.suffix != ".py":
            continue
        codes = [SourceFileLoader("dulwich_source", str(path)).get_code("dulwich_source")]
        while codes:
            code = codes.pop()
            names.add(code.co_name)  # a function's or a class's own name
            names.update(code.co_names, code.co_varnames, code.co_cellvars, code.co_freevars)
            codes += [const for const in code.co_consts if isinstance(const, CodeType)]
    return frozenset(n for n in names if n.startswith("_") and not n.startswith("__"))


def private_dulwich_uses(source: str, private: frozenset[str]) -> list[str]:
    """Where `source` imports a private dulwich name, subclasses a dulwich class, or reaches
    for one of dulwich's private names on an object other than its own `self`."""
    nodes = syntax_nodes(source)  # walked once, read twice
    from_dulwich: set[str] = set()
    found = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "dulwich":
            for alias in node.names:
                from_dulwich.add(alias.asname or alias.name)
                if alias.name.startswith("_") or "._" in f".{node.module}":
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dulwich" and "._" in f".{alias.name}":
                    found.append(f"line {node.lineno}: import {alias.name}")
    for node in nodes:
        if isinstance(node, ast.ClassDef):
            bases = {base.id for base in node.bases if isinstance(base, ast.Name)}
            bases |= {base.attr for base in node.bases if isinstance(base, ast.Attribute)}
            if bases & from_dulwich:
                found.append(f"line {node.lineno}: class {node.name} subclasses dulwich")
        elif isinstance(node, ast.Attribute) and node.attr in private:
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_the_scan_for_dulwich_privates_finds_each_kind() -> None:
    private = dulwich_private_names()
    assert {"_pack_cache", "_iter_loose_objects", "_get_shafile_path"} <= private
    samples = [
        "from dulwich.object_store import DiskObjectStore\nclass S(DiskObjectStore): pass\n",
        "def f(store):\n    return list(store._iter_loose_objects())\n",
        "def f(git):\n    return git.objects._pack_cache\n",
        "from dulwich._pack import apply_delta\n",
        "import dulwich._objects\n",
    ]
    for sample in samples:
        assert private_dulwich_uses(sample, private), sample
    assert private_dulwich_uses("def f(self):\n    return self._kept\n", private) == []


# `.name` after a dot, with any spaces, line breaks or continuations between: every
# attribute a source can name, and more (in strings and comments too).
ATTRIBUTE_TEXT = re.compile(r"\.[\s\\]*(_\w+)")


def may_use_dulwich_privates(source: str, private: frozenset[str]) -> bool:
    """False only where `private_dulwich_uses` finds nothing: the source names no dulwich
    and no private name of dulwich after a dot. Most files do neither, and a look at the
    text costs a fraction of parsing them."""
    return "dulwich" in source or any(name in private for name in ATTRIBUTE_TEXT.findall(source))


def test_the_text_filter_keeps_every_file_the_scan_would_flag() -> None:
    private = dulwich_private_names()
    samples = [
        "def f(git):\n    return git.objects._pack_cache\n",
        "def f(git):\n    return (git.objects.\n        _pack_cache)\n",
        "def f(git):\n    return git.objects. \\\n_pack_cache\n",
        "from dulwich.object_store import DiskObjectStore\nclass S(DiskObjectStore): pass\n",
    ]
    for sample in samples:
        assert private_dulwich_uses(sample, private), sample
        assert may_use_dulwich_privates(sample, private), sample
    assert not may_use_dulwich_privates("def f(self):\n    return self.kept._x9q\n", private)


def test_no_code_of_the_project_uses_a_private_name_of_dulwich() -> None:
    private = dulwich_private_names()
    sources = {path: path.read_text() for path in project_files()}
    assert len(sources) > 200  # the whole project: beads, the layers above, bench and tests
    found = [
        f"{path.relative_to(ROOT)} {where}"
        for path, source in sources.items()
        if may_use_dulwich_privates(source, private)
        for where in private_dulwich_uses(source, private)
    ]
    assert found == []


PACKAGES = ("beads", "inbox", "mail", "gates", "web")


def imported_modules(source: str) -> list[str]:
    """Every module `source` imports (at any depth: inside functions and `TYPE_CHECKING`
    blocks too), by its absolute name; a relative import is named by its dots."""
    names = []
    for node in syntax_nodes(source):
        if isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def test_the_import_scan_sees_imports_inside_functions_and_type_checking() -> None:
    sample = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dulwich.client import X\n"
        "def f():\n    import dulwich.pack\n    from . import sibling\n"
    )
    assert imported_modules(sample) == ["typing", "dulwich.client", "dulwich.pack", "."]


def test_nothing_outside_the_door_imports_dulwich() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for top in PACKAGES
        for path in sorted((ROOT / top).rglob("*.py"))
        if (ROOT / "beads" / "git") not in path.parents
        # an import of dulwich names it: only such files need parsing
        if "dulwich" in (source := path.read_text())
        for name in imported_modules(source)
        if name.split(".")[0] == "dulwich"
    ]
    assert found == []


def test_the_door_imports_of_beads_only_errors_and_faults() -> None:
    allowed = ("beads.errors", "beads.faults")
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "beads" / "git").rglob("*.py"))
        for name in imported_modules(path.read_text())
        if name.startswith(".")
        or (
            name.split(".")[0] == "beads"
            and name not in allowed
            and not name.startswith("beads.git")
        )
        or name == "beads"
    ]
    assert found == []
    for old in ("gitobjects", "gitrefs", "gitrepo", "packmerge", "treedelta", "repack"):
        assert not (ROOT / "beads" / f"{old}.py").exists()


def test_dulwich_has_no_upper_bound() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (spec,) = [spec for spec in project["dependencies"] if spec.startswith("dulwich")]
    assert "<" not in spec


def _generator() -> Any:
    """docs/gen.py, the generator of the command and settings references, as a module."""
    spec = importlib.util.spec_from_file_location("docs_gen", ROOT / "docs" / "gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_references_are_up_to_date() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "gen.py"), "--check"],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    if result.returncode == 2:  # written under another click release: the wording differs
        pytest.skip(result.stderr.strip())
    assert result.returncode == 0, result.stderr  # it names the command that regenerates them


def test_a_stale_reference_fails_the_check_and_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gen = _generator()
    stale = tmp_path / "cli.md"
    stale.write_text(gen.cli_reference().replace("## `gc mail send`", "## `gc mail post`"))
    config_md = tmp_path / "config.md"
    config_md.write_text(gen.config_reference())
    monkeypatch.setattr(gen, "CLI_MD", stale)
    monkeypatch.setattr(gen, "CONFIG_MD", config_md)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1
    assert capsys.readouterr().err == "cli.md is stale: run python docs/gen.py\n"


def test_the_references_hold_every_command_and_setting() -> None:
    from beads.settings.config import SETTINGS
    from beads.settings.localconfig import LOCAL_KEYS
    from gc_beads.commands import COMMANDS

    cli_md = (ROOT / "docs" / "cli.md").read_text()
    for name in COMMANDS:
        assert f"## `gc {name}`" in cli_md
    for sub in ("gc thread claim", "gc mail conformance", "gc gate watch", "inbox wait-reply"):
        assert f"## `{sub}`" in cli_md
    config_md = (ROOT / "docs" / "config.md").read_text()
    for key in [*SETTINGS, *LOCAL_KEYS]:
        assert f"| `{key}` |" in config_md


def test_each_synced_settings_row_says_what_the_value_must_be(gc_store: GcRunner) -> None:
    synced, local = _generator().config_reference().split("## Machine-local settings")
    rows = [line.split(" | ") for line in synced.splitlines() if line.startswith("| `")]
    assert rows and all(row[1].startswith("must be ") for row in rows), rows
    # A machine-local row: what the setting is for, when its reader says, then the same words.
    rows = [line.split(" | ") for line in local.splitlines() if line.startswith("| `")]
    assert rows and all(row[1].split("; ")[-1].startswith("must be ") for row in rows), rows
    # The refusal it is made from names the setting to fix, as the row's neighbours do.
    refused = gc_store("config", "set", "store.prefix", "9x")
    assert refused.returncode == 30
    assert refused.stderr == (
        "gc: store.prefix must be a lowercase letter then up to 15 letters or digits, not '9x'\n"
    )
