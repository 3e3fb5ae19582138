"""Inbox items as text for an agent's context: `<system-reminder>` blocks.

Every field is stripped of `<system-reminder>` tags until none remain, so an item cannot close
the block it sits in and speak as the system. A producer may show its items its own way
(a section of its `ProducerSet`, inbox/producers.py: mail shows at most 3 messages, in its own
words); other items are listed one line each.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from inbox.deliveryconfig import MAX_CONTEXT_CHARS

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from inbox.items import Item

    # The section of an item type, or None (`ProducerSet.section`).
    Sections = Callable[[str], Callable[[Sequence[Item]], list[str]] | None]

__all__ = ["MAX_CONTEXT_CHARS", "fit", "preview", "render", "strip_tags"]

PREVIEW_CHARS = 240
MAX_ITEM_CHARS = 2000
MIN_ITEM_CHARS = 80  # an item shortened to fit the cap keeps at least this much of its text
_TAG = re.compile(r"</?system-reminder>", re.IGNORECASE)
_SPACE = re.compile(r"[\s\x00-\x1f\x7f]+")
PRIORITY_NAMES = ("P0 critical", "P1 high", "P2", "P3 low", "P4 lowest")


def strip_tags(text: str) -> str:
    """Remove `<system-reminder>` and `</system-reminder>` until none remain (nested tricks too)."""
    while True:
        stripped = _TAG.sub("", text)
        if stripped == text:
            return text
        text = stripped


def preview(text: str, limit: int = PREVIEW_CHARS, marker: str = " ... [preview truncated]") -> str:
    """One line: tags stripped, whitespace and control characters collapsed, at most `limit`."""
    line = _SPACE.sub(" ", strip_tags(text[: limit * 16])).strip()
    line = strip_tags(line)
    return line if len(line) <= limit else line[:limit].rstrip() + marker


HUMAN = "human"  # the acting agent of a person at this machine's terminal (beads/records/record.py)


def seen_as(name: str) -> str:
    """A name as a reader takes it: as shown (`preview`), invisible characters and spaces
    dropped, compatibility forms folded (NFKC), case folded. `" Human\t"` is `human`."""
    line = preview(name, 160, "...")
    if not line.isascii():
        import unicodedata

        kept = "".join(c for c in line if unicodedata.category(c) not in ("Cf", "Zs", "Mn"))
        line = unicodedata.normalize("NFKC", kept)
    return line.replace(" ", "").casefold()


def names_human(name: str | None) -> bool:
    """True when `name` reads as `human`, however it is spaced, cased or disguised."""
    return isinstance(name, str) and seen_as(name) == HUMAN


def shown_source(item: Item) -> str:
    """Who an item is from, as shown: `mayor (pushed by eve)` when the pusher is not the
    source it claims (anyone may name a source; the pusher is recorded by the push). A
    source that only reads as `human` (spaced, cased otherwise) always shows its pusher."""
    source = preview(item.source, 160, "...")
    if item.source != HUMAN and names_human(item.source):
        return f"{source} (pushed by {item.pusher or 'an unknown pusher'})"
    if item.pusher and item.pusher != item.source:
        return f"{source} (pushed by {item.pusher})"
    return source


def render(
    items: Sequence[Item], item_chars: int = MAX_ITEM_CHARS, sections: Sections | None = None
) -> str:
    """The `<system-reminder>` block for delivered `items` (most urgent first); "" if none:
    first the items no producer shows its own way (each content cut at `item_chars`, with a
    pointer to the whole), then one section per item type that `sections(type)` gives one for
    (in the order of first appearance)."""
    if not items:
        return ""
    generic: list[Item] = []
    shown: dict[str, list[Item]] = {}
    for item in items:
        if item.type in shown or (sections is not None and sections(item.type) is not None):
            shown.setdefault(item.type, []).append(item)
        else:
            generic.append(item)
    blocks = [generic_section(generic, item_chars)] if generic else []
    for item_type, own in shown.items():
        section = sections(item_type) if sections is not None else None
        assert section is not None
        blocks.append(section(own))
    lines = ["<system-reminder>"]
    for n, block in enumerate(blocks):
        lines += ([""] if n else []) + [strip_tags(line) for line in block]
    lines.append("</system-reminder>")
    return "\n".join(lines)


def generic_section(items: Sequence[Item], item_chars: int = MAX_ITEM_CHARS) -> list[str]:
    """One line per item: priority, type, who it is from, its content (cut at `item_chars`,
    saying where the whole is)."""
    lines = [f"gc inbox: {len(items)} new item(s)."]
    for item in items:
        label = f"[{PRIORITY_NAMES[item.priority]} {item.type} from {shown_source(item)}]"
        marker = f" ... [cut; the whole item {item.id}: gc inbox list --delivered --json]"
        lines.append(f"- {label} {preview(item.content, item_chars, marker)}")
    return lines


def fit(
    items: Sequence[Item], cap: int = MAX_CONTEXT_CHARS, sections: Sections | None = None
) -> tuple[list[Item], str]:
    """The items to deliver now and their block, at most `cap` characters (Claude Code cuts a
    hook's context near 10,000 and the rest would be lost while counted as delivered).

    `items` come most urgent first. Priority 0 items are all taken (with nothing urgent, the
    first item is, so a drain always makes progress); while they alone exceed the cap, the
    contents are shortened (each with its pointer). Then the others follow in order while
    their block fits; the rest stay pending for the next drain. `sections`: as `render`
    takes them."""
    must = [item for item in items if item.priority == 0] or list(items[:1])
    limit = MAX_ITEM_CHARS
    text = render(must, limit, sections)
    while len(text) > cap and limit > MIN_ITEM_CHARS:
        # Shorten every generic content by its share of the excess (producers' own sections
        # are bounded by their producers; see mail/section.py).
        limit = max(MIN_ITEM_CHARS, limit - (len(text) - cap) // len(must) - 1)
        text = render(must, limit, sections)
    # The longest run of the others whose block still fits: all of them first (the common
    # case), else found by halving (a block only grows as items join it), a few renders
    # rather than one per item.
    rest = items[len(must) :]
    fits, unknown = 0, len(rest)  # must + rest[:fits] fits; no run past rest[:unknown] can
    count = unknown
    while fits < unknown:
        more = render([*must, *rest[:count]], limit, sections)
        if len(more) <= cap:
            fits, text = count, more
        else:
            unknown = count - 1
        count = (fits + unknown + 1) // 2
    return [*must, *rest[:fits]], text
