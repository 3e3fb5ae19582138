"""The producers of inbox items: who derives items from the store's commits, as one value.

The layers above (mail, decisions, bead gates) make items of what they commit. A program puts
them together in a `ProducerSet` and hands it to `Delivery(root, producers=...)`:

    producers = ProducerSet(
        {"message": add_mail, "decision": add_decisions, "gate": add_gates},  # bead types
        sections={"mail": add_mail_section},  # item types a drain shows its own way
    )

Each loader (`add_mail(producers)`) imports its producer and adds what it has to the set
(`add_deriver`, `add_reconciler`, `add_section`); it runs the first time a change of its bead
type is to be derived (or a drain shows an item of its type), so a drain that finds nothing
new imports no producer, and one that must derive a message imports mail only. A set may
also be given its producers directly (`add_deriver(...)`).

`Delivery(root)` without a set uses the program's default: the entry point `default` of the
group `gc-beads.producers` (a function with no arguments returning a `ProducerSet`), looked up
the first time following git needs producers. Following git (deriving the items of commits
the delivery database has not seen, and moving its watermark past them, inbox/follow.py)
needs every producer known: with no set given and none installed, it stays off, and says so
once on stderr. Nothing is lost: a process that knows the producers derives what is missing.

The module functions `register_deriver`, `register_reconciler`, `register_section` and
`declare` (and their readers) are the former process-wide registry: deprecated aliases, kept
for one release, whose registrations join the default set of every `Delivery(root)`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence

TYPE_CHECKING = False  # the hooks never import typing (tests/test_hooks.py)
if TYPE_CHECKING:
    from typing import Any

    from beads.records.record import Bead
    from inbox.items import Item

    Deriver = Callable[[Sequence["Change"]], list[Item]]
    Reconciler = Callable[[Any, str], object]  # (the Delivery, the agent)
    Section = Callable[[Sequence[Item]], list[str]]
    Loader = Callable[["ProducerSet"], None]

# The entry-point group a program's default producer set is found in (its entry `default`).
GROUP = "gc-beads.producers"  # the distribution's name: no module of a layer above


class Change:
    """One bead changed by a commit range, as a deriver gets it: `new` (None when deleted) and
    `old` (None when created; read from git only when a deriver asks for it)."""

    __slots__ = ("new", "created", "_old", "_load")

    def __init__(
        self,
        new: Bead | None,
        old: Bead | None = None,
        load_old: Callable[[], Bead | None] | None = None,
    ) -> None:
        self.new = new
        self.created = old is None and load_old is None  # the bead is new in the range
        self._old = old
        self._load = load_old

    @property
    def old(self) -> Bead | None:
        """The bead before the range (read on first use)."""
        if self._load is not None:
            self._old, self._load = self._load(), None
        return self._old


class ProducerSet:
    """The producers one program knows: derivers per bead type, reconcilers, sections per
    item type, and the loaders that add them on first need (see the module's docstring)."""

    def __init__(
        self,
        loaders: Mapping[str, Loader] | None = None,
        sections: Mapping[str, Loader] | None = None,
    ) -> None:
        """`loaders`: per bead type that has a deriver, the function that adds it (importing
        its producer); `sections`: per item type shown its own way, the function that adds
        its section."""
        self._derivers: dict[str, Deriver] = {}
        self._reconcilers: list[Reconciler] = []
        self._sections: dict[str, Section] = {}
        self._loaders: dict[str, Loader] = {}
        self._section_loaders: dict[str, Loader] = {}
        self.declare(loaders or {}, sections)

    def __repr__(self) -> str:
        return f"ProducerSet(derives={sorted(self.derived_types())})"

    def declare(
        self, loaders: Mapping[str, Loader], sections: Mapping[str, Loader] | None = None
    ) -> ProducerSet:
        """Add producers loaded on first need (as the constructor's arguments); returns the
        set. A bead or item type that already has its producer keeps it."""
        for bead_type, load in loaders.items():
            if bead_type not in self._derivers:
                self._loaders[bead_type] = load
        for item_type, load in (sections or {}).items():
            if item_type not in self._sections:
                self._section_loaders[item_type] = load
        return self

    def add_deriver(self, bead_type: str, deriver: Deriver) -> None:
        """`deriver(changes)` makes the items of the changed beads of `bead_type` (it gets
        every change of a commit range and picks its own; InvalidInput for a bead it cannot
        use)."""
        self._derivers[bead_type] = deriver

    def add_reconciler(self, reconciler: Reconciler) -> None:
        """`reconciler(delivery, agent)` records the items of `agent` its producer knows of
        (idempotent: dedup keys); `gc inbox drain --reconcile` runs every one."""
        if reconciler not in self._reconcilers:
            self._reconcilers.append(reconciler)

    def add_section(self, item_type: str, section: Section) -> None:
        """`section(items)` gives the lines a drain shows for its items of `item_type` (most
        urgent first), in place of the generic "new item(s)" list (inbox/render.py)."""
        self._sections[item_type] = section

    def include(self, other: ProducerSet) -> ProducerSet:
        """Add what `other` has and this set has not (loaded or still to load); returns the
        set."""
        for bead_type, deriver in other._derivers.items():
            self._derivers.setdefault(bead_type, deriver)
            self._loaders.pop(bead_type, None)
        for reconciler in other._reconcilers:
            self.add_reconciler(reconciler)
        for item_type, section in other._sections.items():
            self._sections.setdefault(item_type, section)
            self._section_loaders.pop(item_type, None)
        return self.declare(other._loaders, other._section_loaders)

    def derived_types(self) -> frozenset[str]:
        """The bead types whose changes make items (none of their producers is imported)."""
        return frozenset(self._derivers.keys() | self._loaders.keys())

    def deriver(self, bead_type: str) -> Deriver | None:
        """The deriver of `bead_type` (its loader run now if it has not run yet)."""
        load = self._loaders.get(bead_type)
        if load is not None:
            load(self)  # dropped only once it has run: another thread meanwhile runs it too
            self._loaders.pop(bead_type, None)
        return self._derivers.get(bead_type)

    def section(self, item_type: str) -> Section | None:
        """How a drain shows items of `item_type` (its loader run now if it has not run
        yet); None: the generic list."""
        load = self._section_loaders.get(item_type)
        if load is not None:
            load(self)
            self._section_loaders.pop(item_type, None)
        return self._sections.get(item_type)

    def reconcilers(self) -> list[Reconciler]:
        """Every reconciler (each loader run first: any producer may have one)."""
        for bead_type in list(self._loaders):
            self.deriver(bead_type)
        return list(self._reconcilers)


# -- the program's default set ------------------------------------------------------------

_NOT_LOOKED_UP = object()
# The entry point's function, once looked up (None: none installed). What is installed does
# not change while a process runs, so one lookup serves every Delivery of the process.
_factory: Any = _NOT_LOOKED_UP


def default_producers() -> ProducerSet | None:
    """A new copy of the program's default set: the runtime's (`beads.runtime`), else the
    entry point `default` of `GROUP`, with what the deprecated `register_*` functions
    registered; None, said once on stderr, when no program installed one."""
    global _factory
    from beads.runtime import current

    given = current().producers  # the program's set, handed over without a lookup
    if given is not None:
        made = given()
        if not isinstance(made, ProducerSet):
            raise TypeError(f"the runtime's producers gave {type(made).__name__}")
        return made.include(_legacy)
    if _factory is _NOT_LOOKED_UP:
        from importlib.metadata import entry_points  # lazy: a slow import, only when needed

        found = list(entry_points(group=GROUP, name="default"))
        _factory = found[0].load() if found else None
        if _factory is None and not _legacy_declared:
            print(
                f"gc-beads: no producer set installed (entry point {GROUP}:default): "
                "inbox items are not derived from git here; reinstall gc-beads",
                file=sys.stderr,
            )
    if _factory is None:
        return ProducerSet().include(_legacy) if _legacy_declared else None
    made = _factory()
    if not isinstance(made, ProducerSet):
        raise TypeError(f"the {GROUP}:default entry point gave {type(made).__name__}")
    return made.include(_legacy)


# -- deprecated: the former process-wide registry ------------------------------------------

_legacy = ProducerSet()
_legacy_declared = False


def _deprecated(name: str, instead: str) -> None:
    import warnings  # lazy: only the deprecated names need it

    warnings.warn(
        f"inbox.producers.{name} is deprecated: {instead}", DeprecationWarning, stacklevel=3
    )


def register_deriver(bead_type: str, deriver: Deriver) -> None:
    """Deprecated: `ProducerSet.add_deriver` (added to every default set of this process)."""
    _deprecated("register_deriver", "give Delivery a ProducerSet (add_deriver)")
    _legacy.add_deriver(bead_type, deriver)


def register_reconciler(reconciler: Reconciler) -> None:
    """Deprecated: `ProducerSet.add_reconciler` (added to every default set of this
    process)."""
    _deprecated("register_reconciler", "give Delivery a ProducerSet (add_reconciler)")
    _legacy.add_reconciler(reconciler)


def register_section(item_type: str, section: Section) -> None:
    """Deprecated: `ProducerSet.add_section` (added to every default set of this process)."""
    _deprecated("register_section", "give Delivery a ProducerSet (add_section)")
    _legacy.add_section(item_type, section)


def declare(
    loaders: Mapping[str, Callable[[], None]],
    sections: Mapping[str, Callable[[], None]] | None = None,
) -> None:
    """Deprecated: `ProducerSet(loaders, sections)`. The loaders here take no argument and
    register through the deprecated `register_*` functions."""
    global _legacy_declared
    _deprecated("declare", "give Delivery a ProducerSet (its loaders)")

    def adapt(load: Callable[[], None]) -> Loader:
        def run(producers: ProducerSet) -> None:
            import warnings

            with warnings.catch_warnings():  # the caller was told once, here
                warnings.simplefilter("ignore", DeprecationWarning)
                load()
            producers.include(_legacy)

        return run

    _legacy.declare(
        {t: adapt(load) for t, load in loaders.items()},
        {t: adapt(load) for t, load in (sections or {}).items()},
    )
    _legacy_declared = True


def declared() -> bool:
    """Deprecated: True when this process has a default set (`Delivery(root)` follows git)."""
    _deprecated("declared", "Delivery follows git with its ProducerSet")
    return _process_set() is not None


def derived_types() -> frozenset[str]:
    """Deprecated: `ProducerSet.derived_types` of this process's default set."""
    _deprecated("derived_types", "use ProducerSet.derived_types")
    found = _process_set()
    return found.derived_types() if found is not None else frozenset()


def deriver(bead_type: str) -> Deriver | None:
    """Deprecated: `ProducerSet.deriver` of this process's default set."""
    _deprecated("deriver", "use ProducerSet.deriver")
    found = _process_set()
    return found.deriver(bead_type) if found is not None else None


def section(item_type: str) -> Section | None:
    """Deprecated: `ProducerSet.section` of this process's default set."""
    _deprecated("section", "use ProducerSet.section")
    found = _process_set()
    return found.section(item_type) if found is not None else None


def reconcilers() -> list[Reconciler]:
    """Deprecated: `ProducerSet.reconcilers` of this process's default set."""
    _deprecated("reconcilers", "use ProducerSet.reconcilers")
    found = _process_set()
    return found.reconcilers() if found is not None else []


_process: list[ProducerSet | None] = []  # the deprecated readers' one default set


def _process_set() -> ProducerSet | None:
    if not _process:
        _process.append(default_producers())
    return _process[0]
