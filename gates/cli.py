"""`gc gate`: arrives with the gates issue."""

import click


@click.group(invoke_without_command=True)
def gate() -> None:
    """Session gates, bead gates and decisions (not yet)."""
    from beads.errors import InvalidInput

    raise InvalidInput("gc gate is not built yet")
