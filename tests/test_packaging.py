"""The dependency floors CI tests are the floors pyproject.toml declares."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

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
