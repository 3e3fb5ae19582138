"""`gc mail`: arrives with the mail issue."""

import click


@click.group(invoke_without_command=True)
def mail() -> None:
    """Send and read mail between agents (not yet)."""
    from beads.errors import InvalidInput

    raise InvalidInput("gc mail is not built yet")
