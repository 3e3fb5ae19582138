"""The command-line contract of issue 13: `--json` everywhere and agreeing with the exit code,
clear exits for impossible paths, escapes on text output, one JSON shape per command."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import GcRunner


def test_doctor_json_ok_agrees_with_the_exit_code(gc: GcRunner, tmp_path: Path) -> None:
    assert gc("init").returncode == 0
    healthy = gc("doctor", "--json")
    assert healthy.returncode == 0 and json.loads(healthy.stdout)["ok"] is True
    messages = tmp_path / ".beads" / "messages"
    gc.json("mail", "send", "dog", "-m", "hi")
    messages.rename(tmp_path / "outside")
    messages.symlink_to(tmp_path / "outside")
    damaged = gc("doctor", "--json")
    reply = json.loads(damaged.stdout)
    assert damaged.returncode == 50
    assert reply["ok"] is False and reply["healthy"] is False
    assert reply["error"]["code"] == "storage_error" and "not fixed" in reply["error"]["message"]
    assert damaged.stderr.strip().startswith("gc: ") and len(damaged.stderr.splitlines()) == 1
