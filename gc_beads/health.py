"""What `gc doctor` checks of the layers above the store: each layer's check of the files it
keeps under `.runtime/`, and the caches derived from git that `--rebuild-index` removes,
registered with `beads.health.layerchecks` (by module path: nothing is imported until
doctor runs)."""

from __future__ import annotations


def register_checks() -> None:
    """Have `gc doctor` run every layer's check (the delivery database, what stands where
    the origins for reading commands are kept), and remove those origins with the index.
    Safe to call more than once."""
    from beads.health.layerchecks import register_cache, register_check

    register_check("inbox.health:check")
    register_check("inbox.origincache:check")
    register_cache("inbox.origincache:remove")
