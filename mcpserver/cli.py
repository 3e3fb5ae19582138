"""`gc mcp`: serve the store to an MCP client over stdio; `gc mcp install`: configure one."""

from __future__ import annotations

from pathlib import Path

import click

from beads.cli.common import emit, global_options, settings
from beads.errors import InvalidInput
from beads.runtime import runs_long

INSTALL = "gc mcp needs the mcp extra: pip install 'gc-beads[mcp]'"


@click.group(invoke_without_command=True)
@global_options
@click.pass_context
def mcp(ctx: click.Context) -> None:
    """Serve the store to an MCP client over stdin/stdout (gc-beads[mcp]): mail, work
    threads, delivery items and decisions as tools, acting as --agent (else $GC_ALIAS,
    $GC_SESSION_ID, $GC_AGENT, else human). Runs until the client closes stdin."""
    if ctx.invoked_subcommand is not None:
        return
    import importlib.util

    from mcpserver.agentstore import AgentStore

    if importlib.util.find_spec("mcp") is None:  # finds the SDK without importing it
        raise InvalidInput(INSTALL)
    options = settings()
    # Then the store: a missing one is said before the SDK's import (most of the server's
    # start-up).
    agent_store = AgentStore(options.beads_dir, options.agent)
    try:
        try:
            from mcpserver.server import serve
        except ImportError as exc:
            if (exc.name or "").partition(".")[0] in ("mcp", "mcp_types", "pydantic", "anyio"):
                raise InvalidInput(INSTALL) from None
            raise
        runs_long()  # a server: the garbage collector's usual collections back
        serve(agent_store)
    finally:
        agent_store.close()


@mcp.command()
@click.option(
    "--file",
    "file_path",
    help="The file to merge into (default: .mcp.json of the project: $CLAUDE_PROJECT_DIR, "
    "else the nearest directory up with .claude, .git or .beads).",
)
@global_options
def install(file_path: str | None) -> None:
    """Add the gc-beads server (`gc mcp` from PATH, no agent named) to the project's
    .mcp.json for Claude Code, and print the same for other clients. Idempotent."""
    from gates.install import project_root
    from mcpserver.install import ENTRY, FILE, SERVER, others
    from mcpserver.install import install as merge

    path = Path(file_path) if file_path else project_root(Path.cwd()) / FILE
    changed = merge(path)
    clients = others()
    done = f"Added {SERVER} to {path}" if changed else f"{path} already has {SERVER}"
    lines = [done, "", "The same server for other clients:"]
    for client, text in clients.items():
        lines += ["", f"{client}:", text]
    emit(
        {"file": str(path), "changed": changed, "server": SERVER, "entry": ENTRY,
         "others": clients},
        "\n".join(lines),
    )  # fmt: skip
