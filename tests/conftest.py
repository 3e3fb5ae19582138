"""Shared fixtures: stores on real disks and a runner for the real `gc` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from beads.example import init_example
from beads.store import Store
from gates import register_producers

# As `gc` and the hook do: in-process sends and drains derive items from git.
register_producers()


def gc_program() -> str:
    """The installed `gc` console script of this Python (never another `gc` on PATH)."""
    beside = Path(sys.executable).parent / "gc"
    found = str(beside) if beside.exists() else shutil.which("gc")
    assert found, "the gc console script is not installed (pip install .)"
    return found


class GcRunner:
    """Runs `gc` in a subprocess, as a user would, in `cwd` with a clean identity."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}

    def __call__(
        self,
        *args: str,
        input: bytes | str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        data = input.encode() if isinstance(input, str) else input
        result = subprocess.run(
            [gc_program(), *args],
            cwd=cwd or self.cwd,
            input=data,
            capture_output=True,
            env={**self.env, **(env or {})},
            timeout=120,
        )
        return subprocess.CompletedProcess(
            result.args,
            result.returncode,
            result.stdout.decode("utf-8", "replace"),
            result.stderr.decode("utf-8", "replace"),
        )

    def json(self, *args: str, **kwargs: object) -> dict:
        result = self(*args, "--json", **kwargs)  # type: ignore[arg-type]
        assert result.stdout, result.stderr
        return json.loads(result.stdout)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened, _ = Store.init(tmp_path, agent="tester")
    yield opened
    opened.close()


@pytest.fixture
def example_store(tmp_path: Path) -> Iterator[Store]:
    opened, _ = init_example(tmp_path, agent="tester")
    yield opened
    opened.close()


@pytest.fixture
def gc(tmp_path: Path) -> GcRunner:
    return GcRunner(tmp_path)


def git(*args: str, cwd: Path) -> str:
    """Run the real git CLI; returns stdout, fails the test on a non-zero exit."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout
