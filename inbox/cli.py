"""`gc inbox`: arrives with the delivery issue."""

import click


@click.group(invoke_without_command=True)
def inbox() -> None:
    """Delivery items, drain and wait (not yet)."""
    from beads.errors import InvalidInput

    raise InvalidInput("gc inbox is not built yet")
