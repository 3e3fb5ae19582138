"""The records: a bead, its canonical YAML bytes (written and read), ids, times, limits
and agents' names."""
