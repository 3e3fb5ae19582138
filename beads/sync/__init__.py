"""Sync with remotes: fetch, the gate for incoming trees, the three-way merge, push, and
the background syncer of `sync.auto`."""
