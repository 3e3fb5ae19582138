"""gates layer (not yet built)."""
