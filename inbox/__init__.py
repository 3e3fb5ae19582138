"""inbox layer (not yet built)."""
