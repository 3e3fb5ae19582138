"""`gc web`: serve the store's site until interrupted (Ctrl-C, exit 0)."""

from __future__ import annotations

import click

from beads.cli.common import emit, global_options, open_store
from beads.errors import InvalidInput
from beads.runtime import runs_long

# The distributions of the `web` extra, by module name: a missing one is an install to do.
EXTRA = ("flask", "werkzeug", "jinja2", "markupsafe", "itsdangerous", "blinker")
INSTALL = "gc web needs the web extra: pip install 'gc-beads[web]' (from a checkout: '.[web]')"


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0: any free port."
)
@click.option(
    "--token",
    help="Required of every request, at least 16 characters (off loopback, made up and "
    "printed on stderr when not given).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the site in a browser.")
@global_options
def web(host: str, port: int, token: str | None, open_browser: bool) -> None:
    """Serve a read-only site of the store: agents, mailboxes, conversations, work threads,
    gates, decisions, history with field-level diffs, search. Prints its URL."""
    try:
        from web.app import is_loopback, serve, url_of
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] in EXTRA:
            raise InvalidInput(INSTALL) from None
        raise
    made = token is None and not is_loopback(host)
    if made:
        import secrets

        token = secrets.token_urlsafe(24)
    server = serve(open_store(), host, port, token)
    url = url_of(server, token)
    if made:  # the one place it is shown: whoever started the site passes it on
        click.echo(
            f"gc web: {host} is not a loopback address, so the site needs the token made "
            f"for it: open {url}",
            err=True,
        )
    emit({"url": url, "host": host, "port": server.port, "token": token}, f"Serving {url}")
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    runs_long()  # a server: the garbage collector's usual collections back
    server.serve_forever()  # until Ctrl-C, which werkzeug's server takes as its end: exit 0
