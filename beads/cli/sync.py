"""`gc remote`, `gc clone`, `gc sync`: sharing one store between machines through git."""

from __future__ import annotations

import time

import click

from beads.cli.common import (
    Duration,
    FsPath,
    emit,
    global_options,
    limit_option,
    open_store,
    settings,
    table,
)
from beads.errors import GcError
from beads.runtime import runs_long


@click.group()
def remote() -> None:
    """Remotes of this store (kept in its git config: never synced)."""


@remote.command("add")
@click.argument("name")
@click.argument("url")
@global_options
def remote_add(name: str, url: str) -> None:
    """Add remote NAME at URL (a path, file://, git://, ssh or http(s) URL)."""
    from beads.settings.localconfig import add_remote

    url = add_remote(open_store().root / ".git", name, url)
    emit({"remote": {"name": name, "url": url}}, f"Added remote {name} {url}")


@remote.command("remove")
@click.argument("name")
@global_options
def remote_remove(name: str) -> None:
    """Forget remote NAME, its remote-tracking refs and its sync status."""
    from beads.sync.syncing import remove_remote

    remove_remote(open_store().root, name)
    emit({"removed": name}, f"Removed remote {name}")


@remote.command("list")
@limit_option
@global_options
def remote_list(limit: int | None) -> None:
    """List the remotes: name and URL."""
    from beads.settings.localconfig import remotes

    found = dict(list(remotes(open_store().root / ".git").items())[:limit])
    emit(
        {"remotes": [{"name": n, "url": u} for n, u in found.items()]},
        lambda: table([[n, u] for n, u in found.items()]),
    )


@click.command()
@click.argument("url")
@click.argument("path", default=".", type=FsPath(file_okay=False))
@global_options
def clone(url: str, path: str) -> None:
    """Make a store in PATH/.beads from the store at URL (its remote `origin`)."""
    from beads.store import Store
    from beads.sync.syncing import clone as clone_store

    root = clone_store(url, path, agent=settings().agent)
    store = Store(root, agent=settings().agent)  # builds the index and the view
    click.get_current_context().call_on_close(store.close)
    emit(
        {"path": str(root), "prefix": store.prefix, "remote": "origin", "url": url},
        f"Cloned {url} into {root}",
    )


@click.command()
@click.argument("name", required=False)
@click.option("--status", "show_status", is_flag=True, help="Show ahead/behind, last error.")
@click.option("--watch", is_flag=True, help="Keep syncing every --interval until stopped.")
@click.option("--interval", type=Duration(0.5), help="With --watch (default: sync.interval).")
@global_options
def sync(name: str | None, show_status: bool, watch: bool, interval: float | None) -> None:
    """Fetch from the remote NAME (default: sync.remote, else origin), merge, push."""
    from beads.sync import syncing

    store = open_store()
    if show_status:
        found = syncing.status(store, name)
        emit({"status": found}, lambda: _status_lines(found))
        return
    if watch:
        from beads.settings.localconfig import DEFAULT_INTERVAL, local_settings
        from beads.waiting import pause, terminable

        every = interval or local_settings(store.root / ".git").get(
            "sync.interval", DEFAULT_INTERVAL
        )
        runs_long()  # a watch: the garbage collector's usual collections back
        with terminable():  # SIGTERM ends the watch in one line, never in the middle of a sync
            while True:
                try:
                    shown = _result_line(syncing.sync(store, name).to_json())
                except GcError as exc:  # reported, recorded for --status; the watch goes on
                    shown = f"sync failed: {exc.message}"
                if not settings().json:
                    click.echo(f"{time.strftime('%H:%M:%S')} {shown}")
                pause(every)
    result = syncing.sync(store, name).to_json()
    emit({"sync": result}, lambda: _result_line(result))


def _result_line(result: dict) -> str:
    what = {"none": "up to date", "fast-forward": "fast-forwarded", "merge": "merged"}
    line = f"{result['remote']}: {what[result['action']]}"
    if result["pushed"]:
        line += ", pushed"
    line += f" (at {str(result['head'])[:10]})"
    for conflict in result["conflicts"]:
        line += f"\n  {conflict}"
    return line


def _status_lines(found: dict) -> str:
    last = found["last_sync"]
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last)) if last else "never"
    lines = [f"remote: {found['remote']} {found['url']}"]
    if found["synced"]:
        lines.append(f"ahead {found['ahead']}, behind {found['behind']} (as of the last fetch)")
    else:
        lines.append("never synced with this remote")
    lines.append(f"last sync: {when}")
    if found["last_error"]:
        lines.append(f"last error: {found['last_error']}")
    refused = found.get("refused")
    if refused:
        lines.append(
            f"refused: commit {refused['commit'][:12]} holds {refused['path']}: "
            f"{refused['reason']}; nothing of it was merged, and 'gc sync' exits 30 until a "
            "person repairs the remote's history"
        )
    return "\n".join(lines)
