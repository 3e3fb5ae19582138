"""`gc bead ...`: each command a few lines over the `Store` API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from beads.cli.common import (
    FsPath,
    emit,
    global_options,
    open_store,
    parse_pairs,
    read_text,
    table,
)
from beads.errors import InvalidInput
from beads.records.record import Bead

if TYPE_CHECKING:
    from beads.store import Store

PRIORITY = click.IntRange(0, 4)


@click.group()
def bead() -> None:
    """Create, show, list, change and close beads."""


def _body_options(func: Any) -> Any:
    func = click.option("--stdin", "body_stdin", is_flag=True, help="Read the body from stdin.")(
        func
    )
    func = click.option(
        "--body-file",
        type=FsPath(dir_okay=False, allow_dash=True),
        help="Read the body from a file (- for stdin).",
    )(func)
    return click.option("--body", help="The body text.")(func)


@bead.command()
@click.option("--type", "type_", required=True, help="The bead's type (task, message, ...).")
@click.option("--title", required=True, help="A one-line title.")
@_body_options
@click.option("--assignee", help="The agent this bead is for.")
@click.option("--label", "labels", multiple=True, help="A label (repeatable).")
@click.option(
    "--priority", type=PRIORITY, default=2, show_default=True, help="0 critical .. 4 low."
)
@click.option("--parent", help="The id of a parent bead.")
@click.option(
    "--meta", "meta", multiple=True, metavar="KEY=VALUE", help="A meta field (repeatable)."
)
@global_options
def create(
    type_: str,
    title: str,
    body: str | None,
    body_file: str | None,
    body_stdin: bool,
    assignee: str | None,
    labels: tuple[str, ...],
    priority: int,
    parent: str | None,
    meta: tuple[str, ...],
) -> None:
    """Create a bead; prints its id."""
    store = open_store()
    text = read_text(body, body_file, body_stdin, limit=store.max_body) or ""
    made = store.create(
        type_,
        title,
        text,
        assignee=assignee,
        labels=list(labels),
        priority=priority,
        parent=parent,
        meta=parse_pairs(meta),
    )
    emit({"bead": made.to_dict()}, made.id)


@bead.command()
@click.argument("bead_id")
@global_options
def show(bead_id: str) -> None:
    """Show one bead (any unambiguous id prefix)."""
    found = open_store().get(bead_id)
    emit({"bead": found.to_dict()}, lambda: _block(found))


@bead.command("list")
@click.option("--type", "type_", help="Only this type.")
@click.option(
    "--status", type=click.Choice(["open", "closed", "all"]), help="Which beads (default: open)."
)
@click.option("--all", "show_all", is_flag=True, help="Open and closed: --status all.")
@click.option("--assignee", help="Only beads assigned to this agent.")
@click.option("--from", "sender", help="Only beads from this agent.")
@click.option("--label", help="Only beads with this label.")
@click.option("--thread", help="Only beads of this thread.")
@click.option("--parent", help="Only children of this bead.")
@click.option("--since", help="Created at or after (2026-01-31, RFC 3339, or 2h = two hours ago).")
@click.option("--until", help="Created before (same forms as --since).")
@click.option(
    "--order",
    type=click.Choice(["created", "updated", "priority"]),
    default="created",
    show_default=True,
)
@click.option("--desc", is_flag=True, help="Newest (or most urgent) first.")
@click.option("--limit", type=click.IntRange(min=0), help="At most N beads.")
@global_options
def list_(
    type_: str | None,
    status: str | None,
    show_all: bool,
    assignee: str | None,
    sender: str | None,
    label: str | None,
    thread: str | None,
    parent: str | None,
    since: str | None,
    until: str | None,
    order: str,
    desc: bool,
    limit: int | None,
) -> None:
    """List beads from the index (open ones unless --status or --all says otherwise)."""
    from beads.records.times import parse_time

    if show_all and status not in (None, "all"):
        raise InvalidInput(f"give --all or --status {status}, not both")
    status = "all" if show_all else status or "open"

    found = open_store().list(
        type=type_,
        status=None if status == "all" else status,
        assignee=assignee,
        sender=sender,
        label=label,
        thread=thread,
        parent=parent,
        order=order,
        descending=desc,
        limit=limit,
        since=parse_time(since) if since else None,
        until=parse_time(until) if until else None,
    )
    emit({"beads": [b.to_dict() for b in found]}, lambda: _table(found))


@bead.command()
@click.argument("bead_id")
@click.option("--title", help="A new title.")
@_body_options
@click.option("--assignee", help="Assign to this agent.")
@click.option("--unassign", is_flag=True, help="Remove the assignee.")
@click.option("--priority", type=PRIORITY, help="0 critical .. 4 low.")
@click.option("--parent", help="A new parent bead.")
@click.option("--add-label", multiple=True, help="Add a label (repeatable).")
@click.option("--remove-label", multiple=True, help="Remove a label (repeatable).")
@click.option("--meta", multiple=True, metavar="KEY=VALUE", help="Set a meta field (repeatable).")
@click.option("--unset-meta", multiple=True, metavar="KEY", help="Remove a meta field.")
@global_options
def update(
    bead_id: str,
    title: str | None,
    body: str | None,
    body_file: str | None,
    body_stdin: bool,
    assignee: str | None,
    unassign: bool,
    priority: int | None,
    parent: str | None,
    add_label: tuple[str, ...],
    remove_label: tuple[str, ...],
    meta: tuple[str, ...],
    unset_meta: tuple[str, ...],
) -> None:
    """Change a bead's fields, labels or meta."""
    if assignee and unassign:
        raise InvalidInput("give --assignee or --unassign, not both")
    store = open_store()
    fields: dict[str, Any] = {}
    text = read_text(body, body_file, body_stdin, limit=store.max_body)
    for name, value in (
        ("title", title),
        ("body", text),
        ("assignee", assignee),
        ("priority", priority),
        ("parent", parent),
    ):
        if value is not None:
            fields[name] = value
    if unassign:
        fields["assignee"] = None
    changed = store.update(
        bead_id,
        add_labels=add_label,
        remove_labels=remove_label,
        meta=parse_pairs(meta),
        unset_meta=unset_meta,
        **fields,
    )
    emit({"bead": changed.to_dict()}, f"Updated {changed.id}")


@bead.command()
@click.argument("bead_id")
@global_options
def edit(bead_id: str) -> None:
    """Edit a bead's YAML in $EDITOR (or $VISUAL); it is validated, then committed.

    A bead file that does not parse (it arrived by a sync) opens as it is."""
    from beads.errors import NotFound
    from beads.records.codec import dump_bead, load_bead

    store = open_store()
    unparsable = None
    try:
        current = store.get(bead_id)
    except NotFound:
        unparsable = store.unparsable(bead_id)
        if unparsable is None:
            raise
    if unparsable is not None:
        _mend(store, bead_id, *unparsable)
        return
    raw = _edited(store, dump_bead(current), current.id)
    edited = load_bead(raw, what="the edited bead", max_body=store.max_body)
    changed = store.update(current.id, **_edits(current, edited))
    emit(
        {"bead": changed.to_dict()}, f"Updated {changed.id}" if changed != current else "No changes"
    )


def _mend(store: Store, bead_id: str, path: str, content: bytes) -> None:
    """`edit` of a bead file that does not parse (it arrived by a sync or a plain git push):
    it opens as it is, and is committed once what the editor leaves parses."""
    from beads.records.codec import load_bead
    from beads.records.ids import bead_path

    raw = _edited(store, content, bead_id)
    edited = load_bead(raw, what="the edited bead", max_body=store.max_body)
    if bead_path(edited.type, edited.id) != path:
        raise InvalidInput(
            f"the edited bead must keep the id and type its file's path names ({path}); "
            "nothing was changed"
        )
    mended = store.mend(edited)
    emit({"bead": mended.to_dict()}, f"Updated {mended.id}")


def _edited(store: Store, content: bytes, bead_id: str) -> bytes:
    """What $VISUAL or $EDITOR (else vi) leaves of `content`, edited in a file of its own."""
    # Only `edit` needs these; importing them lazily keeps the other commands fast to start.
    import os
    import shlex
    import subprocess
    import tempfile

    # The first of $VISUAL and $EDITOR that names something (one of only spaces does not).
    chosen = (os.environ.get(name, "") for name in ("VISUAL", "EDITOR"))
    editor = next((value for value in chosen if value.strip()), "vi")
    try:
        command = shlex.split(editor)
    except ValueError as exc:  # an unbalanced quote in $VISUAL or $EDITOR
        raise InvalidInput(f"cannot run the editor {editor!r}: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="gc-edit-") as tmp:
        path = os.path.join(tmp, f"{bead_id}.yaml")
        with open(path, "wb") as handle:
            handle.write(content)
        try:
            code = subprocess.call([*command, path])
        except FileNotFoundError:
            raise InvalidInput(f"the editor {command[0]} was not found") from None
        except OSError as exc:
            if os.sep in command[0] and os.path.isdir(command[0]):  # not "Permission denied"
                raise InvalidInput(
                    f"the editor {command[0]} is a directory, not a program"
                ) from None
            raise InvalidInput(f"cannot run the editor {editor!r}: {exc.strerror}") from None
        if code != 0:
            raise InvalidInput(f"the editor exited with status {code}; nothing was changed")
        # A bead file is its body plus a little: an editor (or a script as $EDITOR) that left
        # gigabytes is refused after reading only a bounded prefix.
        limit = 4 * store.max_body + (1 << 20)
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
        if len(raw) > limit:
            raise InvalidInput(f"the edited bead is larger than {limit} bytes; nothing was changed")
    return raw


def _edits(current: Bead, edited: Bead) -> dict[str, Any]:
    """The update that turns `current` into `edited`; fields `edit` may not change raise."""
    from beads.batch import UPDATABLE

    before, after = current.to_dict(), edited.to_dict()
    fixed = (
        "id",
        "type",
        "status",
        "from",
        "created_at",
        "updated_at",
        "closed_at",
        "close_reason",
    )
    for key in fixed:
        if before[key] != after[key]:
            raise InvalidInput(f"'{key}' cannot be changed with edit (use close/reopen for status)")
    changes: dict[str, Any] = {k: after[k] for k in UPDATABLE if before[k] != after[k]}
    removed = [k for k in before["meta"] if k not in after["meta"]]
    return {**changes, "meta": after["meta"], "unset_meta": removed}


@bead.command()
@click.argument("bead_id")
@click.option("--reason", help="Why it is closed.")
@click.option(
    "--force", is_flag=True, help="Close a guarded bead (one its owner's command closes)."
)
@global_options
def close(bead_id: str, reason: str | None, force: bool) -> None:
    """Close a bead."""
    closed = open_store().close_bead(bead_id, reason, force=force)
    emit({"bead": closed.to_dict()}, f"Closed {closed.id}")


@bead.command()
@click.argument("bead_id")
@global_options
def reopen(bead_id: str) -> None:
    """Reopen a closed bead."""
    opened = open_store().reopen(bead_id)
    emit({"bead": opened.to_dict()}, f"Reopened {opened.id}")


def _block(found: Bead) -> str:
    from beads.records.codec import dump_bead

    return dump_bead(found).decode("utf-8").rstrip("\n")


def _table(found: list[Bead]) -> str:
    if not found:
        return "No beads"
    return table(
        [("ID", "TYPE", "STATUS", "P", "ASSIGNEE", "TITLE")]
        + [
            (b.id, b.type, b.status, f"P{b.priority}", b.assignee or "-", _clip(b.title, 72))
            for b in found
        ]  # fmt: skip
    )


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
