"""`gc skill install`: SKILL.md files that teach an agent gc's mail and work threads."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import click

from beads.cli.arguments import FsPath
from beads.cli.common import emit, global_options

SKILLS = ("gc-mail", "work-threads")


@click.group()
def skill() -> None:
    """Agent skills (SKILL.md files) for Claude Code and other agents."""


def skill_text(name: str) -> str:
    """The SKILL.md text of one of SKILLS (`{identity_order}` in it: who the acting agent is,
    in the words of `beads.records.record.identity_order`, the one rule's own list)."""
    from beads.records.record import identity_order

    text = resources.files("mail.threads").joinpath("skill_files", name, "SKILL.md").read_text()
    order = ", ".join(f"`{word}`" for word in identity_order().split(", "))
    return text.replace("{identity_order}", order)


def install_skills(directory: Path) -> dict[str, str]:
    """Write each skill to `directory/<name>/SKILL.md`; returns name -> written|unchanged."""
    outcome = {}
    for name in SKILLS:
        text = skill_text(name)
        path = directory / name / "SKILL.md"
        if path.is_file() and path.read_text() == text:
            outcome[name] = "unchanged"
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".SKILL.md.{os.getpid()}.tmp")
        try:
            temporary.write_text(text)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        outcome[name] = "written"
    return outcome


@skill.command()
@click.option(
    "--dir",
    "directory",
    default=".claude/skills",
    show_default=True,
    type=FsPath(file_okay=False),
    help="Where the skills go (one folder per skill).",
)
@global_options
def install(directory: str) -> None:
    """Write the gc-mail and work-threads skills (SKILL.md) for agents to load."""
    from beads.errors import InvalidInput

    try:
        outcome = install_skills(Path(directory))
    except OSError as exc:
        raise InvalidInput(f"cannot write skills under {directory}: {exc.strerror}") from None
    emit(
        {"dir": directory, "skills": outcome},
        "\n".join(
            f"{state.capitalize()} {Path(directory) / name / 'SKILL.md'}"
            for name, state in outcome.items()
        ),
    )
