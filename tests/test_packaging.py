"""What CI runs: the README's test command, hypothesis's `ci` profile, the declared floors."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

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
