"""mail layer (not yet built)."""
