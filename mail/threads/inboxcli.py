"""The `inbox` program: the commands of `gc thread` (`mail.threads.cli`) under a root of its
own, where `--db PATH` names the store and a missing store is said in inbox's terms."""

from __future__ import annotations

import shlex
from typing import Any

import click

from beads.cli.common import global_options
from beads.errors import NoStore, NotFound
from mail.threads.cli import thread


class InboxGroup(click.Group):
    """The root of the `inbox` program: `--db PATH` is read as `--beads-dir PATH`, and a
    missing store is said in inbox's terms (its database, `inbox init`, `--db`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        renamed = [
            "--beads-dir" + arg[4:] if arg == "--db" or arg.startswith("--db=") else arg
            for arg in args
        ]
        return super().parse_args(ctx, renamed)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NoStore as exc:
            raise NotFound(no_database(exc.where)) from None


def no_database(where: str | None) -> str:
    """What `inbox` says when it finds no database: at `where` (a --db or $GC_BEADS_DIR that
    names none), else here or above."""
    if where is not None:
        command = f"inbox init --db {shlex.quote(where)}"
        return f"no inbox database at {where}; to make one there, run: {command}"
    return (
        "no inbox database here or above; run 'inbox init' to make one, "
        "or pass --db DIR (or set $GC_BEADS_DIR) to use an existing one"
    )


@click.group(cls=InboxGroup, context_settings={"help_option_names": ["-h", "--help"]})
@global_options
@click.version_option("0.1.0", prog_name="gc-beads")
def inbox() -> None:
    """inbox: work threads for agents (the commands of `gc thread`), on a gc-beads store.

    `--db PATH` is another name for `--beads-dir PATH`; `inbox init --db PATH` makes one.

    Exit codes: 0 ok, 10 nothing came, 20 lease conflict, 30 invalid input or transition,
    40 not found, 50 storage or internal error.
    """


@click.command("init")
@click.option("--prefix", help="The id prefix (default gc).")
@global_options
def init(prefix: str | None) -> None:
    """Create the store (gc init) at --db PATH (else $GC_BEADS_DIR, else here)."""
    from beads.cli.admin import init as gc_init

    assert gc_init.callback is not None
    gc_init.callback(path=None, prefix=prefix, example=False)


for _name, _command in thread.commands.items():
    inbox.add_command(_command, _name)
inbox.add_command(init, "init")
