"""The example store: `.beads-example/` in a checkout, `beads/_example` once installed.

It documents the file format (config, a short mail thread, a gate, a decision) and is what
`gc init --example` turns into a working store; the tests use it as a fixture.
"""

from __future__ import annotations

from pathlib import Path

from beads.errors import StorageError
from beads.records.codec import load_bead, load_data
from beads.settings.config import CONFIG_PATH, check_config
from beads.store import Store


def example_dir() -> Path:
    """Where the example's files are: installed with the package, or in the source tree."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_example", here.parent / ".beads-example"):
        if (candidate / CONFIG_PATH).is_file():
            return candidate
    raise StorageError("the example store is not installed with this copy of gc-beads")


def init_example(
    path: str | Path, *, prefix: str | None = None, agent: str | None = None
) -> tuple[Store, bool]:
    """Create a store under `path` holding the example's config and beads (one commit each)."""
    source = example_dir()
    config = check_config(load_data((source / CONFIG_PATH).read_bytes(), what="example config"))
    store, created = Store.init(path, prefix=prefix, agent=agent, config=config)
    if not created:
        return store, False
    files = sorted(p for p in source.rglob("*.yaml") if p.name != CONFIG_PATH)
    beads = [load_bead(p.read_bytes(), what=str(p)) for p in files]
    with store.batch(f"import the example store ({len(beads)} beads)") as batch:
        for bead in beads:
            batch.insert(bead)
    return store, True
