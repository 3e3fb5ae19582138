"""Limits that both the records and the hook's settings check need, in a module that imports
nothing (the hook path reads `DEFAULT_MAX_BODY_BYTES` without loading the record code)."""

DEFAULT_MAX_BODY_BYTES = 1024 * 1024  # `store.max_body_bytes` when config.yaml names none
