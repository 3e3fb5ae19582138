"""The view: the YAML files under `.beads/` that mirror HEAD's tree, and their scan."""
