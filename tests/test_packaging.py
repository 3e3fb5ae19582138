"""What CI runs: the README's test command, hypothesis's `ci` profile, the declared floors."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

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
    from beads.config import SETTINGS
    from beads.localconfig import LOCAL_KEYS
    from gc_beads.commands import COMMANDS

    cli_md = (ROOT / "docs" / "cli.md").read_text()
    for name in COMMANDS:
        assert f"## `gc {name}`" in cli_md
    for sub in ("gc thread claim", "gc mail conformance", "gc gate watch", "inbox wait-reply"):
        assert f"## `{sub}`" in cli_md
    config_md = (ROOT / "docs" / "config.md").read_text()
    for key in [*SETTINGS, *LOCAL_KEYS]:
        assert f"| `{key}` |" in config_md
