"""`gc init`, `gc log`, `gc doctor`, `gc config`: the store as a whole."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from beads.cli.common import (
    FsPath,
    emit,
    global_options,
    json_text,
    one_line,
    open_store,
    progress_bar,
    settings,
)
from beads.errors import StorageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from beads.git import LogEntry


@click.command()
@click.argument("path", required=False, type=FsPath(file_okay=False))
@click.option("--prefix", help="The id prefix (default gc): ids look like PREFIX-7k2qabcd.")
@click.option("--example", is_flag=True, help="Fill the new store with the example beads.")
@global_options
def init(path: str | None, prefix: str | None, example: bool) -> None:
    """Create a store in PATH/.beads (PATH defaults to --beads-dir, else $GC_BEADS_DIR, else
    the working directory; a directory named .beads is the store itself)."""
    from beads.example import init_example
    from beads.initstore import making_store_in
    from beads.location import init_place
    from beads.store import Store

    path = init_place(path if path is not None else settings().beads_dir)
    agent = settings().agent
    with making_store_in(path):
        if example:
            store, created = init_example(path, prefix=prefix, agent=agent)
        else:
            store, created = Store.init(path, prefix=prefix, agent=agent)
    click.get_current_context().call_on_close(store.close)
    verb = "Initialized" if created else "Already initialized"
    emit(
        {"path": str(store.root), "created": created, "prefix": store.prefix},
        f"{verb} gc-beads store in {store.root}",
    )


@click.command()
@click.argument("bead_id", required=False)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@global_options
def log(bead_id: str | None, limit: int) -> None:
    """Show the history (of one bead with ID): commit, time, author, what happened."""
    show_log(lambda: open_store().log(bead_id, limit))


def show_log(read: Callable[[], list[LogEntry]]) -> None:
    """Reply with the commits `read` returns. A history cut at missing commits is a partial
    answer, as `gc doctor`'s report of a damaged store is: the commits read down to the cut,
    then the error naming it (one line on stderr; `"ok": false` with it), exit 50."""
    from beads.git.objects import HistoryCut

    error = None
    try:
        entries = read()
    except HistoryCut as cut:
        entries, error = cut.entries, cut
    emit({"commits": [e.to_json() for e in entries]}, lambda: log_lines(entries), error=error)
    if error is not None:
        click.get_current_context().exit(error.exit_code)


def log_lines(entries: list[LogEntry]) -> str:
    """History as lines: short commit, UTC time, author, first line of the message."""
    lines = []
    for entry in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(entry.time))
        author = entry.author.split(" <")[0]
        lines.append(f"{entry.commit[:10]}  {when}  {author:<12}  {entry.message.splitlines()[0]}")
    return "\n".join(lines)


@click.command()
@click.option("--rebuild-index", is_flag=True, help="Rebuild the index from git alone.")
@click.option("--restore-view", is_flag=True, help="Rewrite view files that differ from HEAD.")
@click.option(
    "--gc", "compact", is_flag=True, help="Repack every object into one pack, with deltas."
)
@click.option(
    "--no-git",
    is_flag=True,
    help="With --gc: repack without the git program even where it is installed.",
)
@click.option(
    "--reset-to",
    metavar="COMMIT",
    help="Move the branch back to COMMIT (before a commit the history check refuses).",
)
@global_options
def doctor(
    rebuild_index: bool, restore_view: bool, compact: bool, no_git: bool, reset_to: str | None
) -> None:
    """Check the repository, the index and the view against HEAD; exit 0 when clean."""
    from beads.health.checkup import doctor as run_doctor
    from beads.health.checkup import doctor_steps

    store = open_store()
    reset = None
    if reset_to is not None:
        from beads.health.historycheck import reset_to as reset_branch

        reset = reset_branch(store, reset_to)
    with progress_bar(doctor_steps(compact), "gc doctor") as advance:
        report = run_doctor(
            store,
            rebuild_index=rebuild_index,
            restore_view=restore_view,
            compact=compact,
            use_git=not no_git,
            progress=advance,
        )
    lines = [
        # (a path may hold a line break: a stray file's name; --json gives it exact)
        f"{p.kind}: {one_line(p.path)}: {p.message}{' (fixed)' if p.fixed else ''}"
        for p in report.problems
    ]
    lines += [f"fixed: {one_line(line)}" for line in report.fixed]
    lines += [f"notice: {line}" for line in report.notices]
    if reset is not None:
        lines.insert(
            0,
            f"reset: the branch moved from {reset['from'][:12]} to {reset['to'][:12]}, leaving "
            f"{len(reset['left'])} commits (still in the reflog: git -C .beads reflog main)",
        )
    error = None
    if not report.problems:
        summary = "store is healthy"
    elif report.ok:
        summary = f"{len(report.problems)} problem(s) found, all fixed"
    else:
        left = sum(not p.fixed for p in report.problems)
        summary = f"{len(report.problems)} problem(s) found, {left} not fixed"
        error = StorageError(summary)
    emit(
        {
            "healthy": report.ok,
            "problems": [p.to_json() for p in report.problems],
            "fixed": report.fixed,
            "notices": report.notices,
            "beads": report.beads,
            **({"reset": reset} if reset is not None else {}),
        },
        "\n".join([*lines, summary]),
        error=error,
    )
    if error is not None:
        click.get_current_context().exit(error.exit_code)


@click.group()
def config() -> None:
    """Show or change config.yaml (committed like every bead)."""


@config.command("get")
@click.argument("key", required=False)
@click.option("--local", is_flag=True, help="This machine's settings (never synced).")
@global_options
def config_get(key: str | None, local: bool) -> None:
    """Print the whole configuration, or the value of a dotted KEY."""
    from beads.errors import NotFound

    if local:  # this machine's settings, as `sync: {auto: true}`
        from beads.settings.localconfig import local_settings

        value: object = {}
        for dotted, setting in local_settings(open_store().root / ".git").items():
            *sections, name = dotted.split(".")  # `delivery.nats.url` nests twice
            node = value
            for section in sections:
                node = node.setdefault(section, {})  # type: ignore[attr-defined]
            node[name] = setting  # type: ignore[index]
    else:
        value = open_store().config
    for part in key.split(".") if key else []:
        if not isinstance(value, dict) or part not in value:
            raise NotFound(f"no config key {key!r}")
        value = value[part]
    emit({"key": key, "value": value}, json_text(value, indent=2))


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--local", is_flag=True, help="A setting of this machine (sync.auto, ...).")
@global_options
def config_set(key: str, value: str, local: bool) -> None:
    """Set a dotted KEY to VALUE (JSON when it parses as JSON, else text).

    Every setting, with what it accepts and its default: docs/config.md."""
    from beads.jsontext import loads

    try:  # a key given twice, or nesting too deep, is refused (InvalidInput)
        parsed = loads(value, f"the value of {key}")
    except ValueError:
        parsed = value
    if local:  # kept in the store's git config: never committed, never synced
        from beads.settings.localconfig import set_local

        parsed = set_local(open_store().root / ".git", key, parsed)
    else:
        from beads.settings.trust import within

        store = open_store()
        store.set_setting(key, parsed)
        waits = sorted(k for k in getattr(store.config, "held", {}) if within(k, key))
        if waits:  # an agent's change of a guarded setting: committed, not yet in force
            text = (f"Set {key} = {json_text(parsed)} in config.yaml; "
                    f"held until a person approves it on this machine with gc trust "
                    f"({', '.join(waits)})")  # fmt: skip
            emit({"key": key, "value": parsed, "held": waits}, text)
            return
    emit({"key": key, "value": parsed}, f"Set {key} = {json_text(parsed)}")
