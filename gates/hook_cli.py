"""`gc hook run` and `gc hook install`: kept apart from the gate commands so the hook, which
runs on every prompt, loads only what it uses."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from beads.cli.common import emit, global_options, settings


@click.group()
def hook() -> None:
    """Claude Code hooks: run one event, install the entries."""


@hook.command()
@global_options
def run() -> None:
    """Handle one Claude Code hook event (its JSON on stdin). Never fails the agent."""
    from gates.hooks import MAX_INPUT_BYTES, log_failure, parse_payload, run_hook

    options = settings()
    payload: dict[str, Any] | None = None
    try:
        payload = parse_payload(sys.stdin.buffer.read(MAX_INPUT_BYTES + 1))
        reply = run_hook(payload, beads_dir=options.beads_dir, agent=options.agent)
    except Exception as exc:  # fail open: log it, exit 0, no block
        if options.debug:
            raise
        log_failure(options.beads_dir, payload, exc)
        return
    if reply:
        click.echo(json.dumps(reply))


@hook.command()
@click.option(
    "--settings",
    "settings_path",
    default=".claude/settings.json",
    show_default=True,
    help="The Claude Code settings file to merge into.",
)
@click.option("--command", default="gc hook run", show_default=True, help="The hook command.")
@global_options
def install(settings_path: str, command: str) -> None:
    """Add `gc hook run` to Claude Code's settings (idempotent; keeps everything else)."""
    from gates.install import install as merge

    path = Path(settings_path)
    added = merge(path, command)
    emit(
        {"settings": str(path), "added": added},
        f"Added {', '.join(added)} to {path}" if added else f"{path} already runs {command!r}",
    )
