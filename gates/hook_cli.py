"""`gc hook run` and `gc hook install`: kept apart from the gate commands so the hook, which
runs on every prompt, loads only what it uses."""

from __future__ import annotations

from pathlib import Path

import click

from beads.cli.common import emit, global_options, settings


@click.group()
def hook() -> None:
    """Claude Code hooks: run one event, install the entries."""


@hook.command()
@click.option(
    "--event",
    help="The event this entry is for (PreToolUse: any payload is judged as a tool call, and "
    "one the gate cannot read is asked about).",
)
@global_options
def run(event: str | None) -> None:
    """Handle one Claude Code hook event (its JSON on stdin). Never fails the agent."""
    from gates.hookrun import main

    options = settings()
    code = main(beads_dir=options.beads_dir, agent=options.agent, debug=options.debug, event=event)
    if code:
        click.get_current_context().exit(code)


@hook.command()
@click.option(
    "--settings",
    "settings_path",
    help="The Claude Code settings file to merge into (default: .claude/settings.json of "
    "the project: $CLAUDE_PROJECT_DIR, else the nearest directory up with .claude, .git "
    "or .beads).",
)
@click.option("--command", default="gc hook run", show_default=True, help="The hook command.")
@global_options
def install(settings_path: str | None, command: str) -> None:
    """Add `gc hook run` to Claude Code's settings (idempotent; keeps everything else)."""
    from gates.install import install as merge
    from gates.install import project_root

    if settings_path is None:
        path = project_root(Path.cwd()) / ".claude" / "settings.json"
    else:
        path = Path(settings_path)
    added = merge(path, command)
    done = f"Added {', '.join(added)} to {path}" if added else f"{path} already runs {command!r}"
    emit(
        {"settings": str(path), "added": added, "skills": "gc skill install"},
        f"{done}\nTo teach agents the mail and work-thread commands: gc skill install",
    )
