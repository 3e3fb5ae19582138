"""The producers of inbox items, registered here so the inbox layer names none of them.

The layers above (mail, decisions, bead gates) make items of what they commit. Each registers
itself with this module when it is imported:

    register_deriver("message", derive)   # its items, from the changes of a commit range
    register_reconciler(reconcile)        # re-derives its items on demand (drain --reconcile)
    register_section("mail", mail_section)  # how a drain shows its items (inbox/render.py)

A program's composition root (`gates.register_producers()`, which `gc` and
`gc hook run` call before they run) declares every bead type that has a deriver, each with a
function that imports its producer, without importing any:

    declare({"message": load_mail, "decision": load_decisions, "gate": load_gates},
            sections={"mail": load_mail_section})

so a drain that finds nothing new imports no producer, and one that must derive a message
imports mail only.

Following git (deriving the items of commits the delivery database has not seen, and moving
its watermark past them, inbox/follow.py) needs every producer known: until a composition root
has declared them, `Delivery.follow` does nothing, and a producer's own commit records the
items its registered derivers make without moving the watermark. Nothing is lost: the next
process that knows the producers derives what is missing. A Python program that drains with
`inbox.Delivery` (or sends with `mail.BeadMail`) calls `gates.register_producers()`
once, then declares or registers its own producers, if any.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from inbox.delivery import Delivery
    from inbox.follow import Change
    from inbox.items import Item

    Deriver = Callable[[Sequence[Change]], list[Item]]
    Reconciler = Callable[[Delivery, str], object]
    Section = Callable[[Sequence[Item]], list[str]]

_derivers: dict[str, Deriver] = {}
_reconcilers: list[Reconciler] = []
_loaders: dict[str, Callable[[], None]] = {}
_sections: dict[str, Section] = {}
_section_loaders: dict[str, Callable[[], None]] = {}
_declared = False


def register_deriver(bead_type: str, deriver: Deriver) -> None:
    """`deriver(changes)` makes the items of the changed beads of `bead_type` (it gets every
    change of a commit range and picks its own; InvalidInput for a bead it cannot use)."""
    _derivers[bead_type] = deriver


def register_reconciler(reconciler: Reconciler) -> None:
    """`reconciler(delivery, agent)` records the items of `agent` its producer knows of
    (idempotent: dedup keys); `gc inbox drain --reconcile` runs every one."""
    if reconciler not in _reconcilers:
        _reconcilers.append(reconciler)


def register_section(item_type: str, section: Section) -> None:
    """`section(items)` gives the lines a drain shows for its items of `item_type` (most
    urgent first), in place of the generic "new item(s)" list (inbox/render.py)."""
    _sections[item_type] = section


def declare(
    loaders: Mapping[str, Callable[[], None]],
    sections: Mapping[str, Callable[[], None]] | None = None,
) -> None:
    """A composition root's call: the bead types that have a deriver, each with a function
    that registers it (by importing its producer), run the first time a change of that type
    is to be derived; and the item types with a section of their own, each with the function
    that registers it. Turns following git on (see the module's docstring)."""
    global _declared
    for bead_type, load in loaders.items():
        if bead_type not in _derivers:
            _loaders[bead_type] = load
    for item_type, load in (sections or {}).items():
        if item_type not in _sections:
            _section_loaders[item_type] = load
    _declared = True


def declared() -> bool:
    """True once a composition root has declared the producers: delivery may follow git."""
    return _declared


def derived_types() -> frozenset[str]:
    """The bead types whose changes make items (none of their producers is imported)."""
    return frozenset(_derivers.keys() | _loaders.keys())


def deriver(bead_type: str) -> Deriver | None:
    """The deriver of `bead_type` (its producer imported now if it was only declared)."""
    load = _loaders.get(bead_type)
    if load is not None:
        load()  # dropped only once it has run: another thread meanwhile waits on the import
        _loaders.pop(bead_type, None)
    return _derivers.get(bead_type)


def section(item_type: str) -> Section | None:
    """How a drain shows items of `item_type` (its producer imported now if only declared);
    None: the generic list."""
    load = _section_loaders.get(item_type)
    if load is not None:
        load()
        _section_loaders.pop(item_type, None)
    return _sections.get(item_type)


def reconcilers() -> list[Reconciler]:
    """Every reconciler (each declared producer imported first: any may have one)."""
    for bead_type in list(_loaders):
        deriver(bead_type)
    return list(_reconcilers)
