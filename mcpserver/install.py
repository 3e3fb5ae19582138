"""`gc mcp install`: the project's MCP configuration for Claude Code (`.mcp.json`), and the
same server for other clients.

The entry runs `gc mcp` found on PATH and names no agent and no path of this machine: the
file is committed with the project and each session's environment says who acts
(`$GC_ALIAS`, `$GC_SESSION_ID`, `$GC_AGENT`). Idempotent; everything else the file holds is
kept; the file is replaced atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from beads.errors import InvalidInput
from beads.jsonfile import load_object, save_object

SERVER = "gc-beads"
ENTRY: dict[str, Any] = {"type": "stdio", "command": "gc", "args": ["mcp"]}
FILE = ".mcp.json"


def install(path: Path) -> bool:
    """Put the `gc-beads` server in the `mcpServers` of the JSON file at `path` (made if
    missing); True when the file changed."""
    config = load_object(path)
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InvalidInput(f"{path}: 'mcpServers' must be an object")
    if servers.get(SERVER) == ENTRY:
        return False
    servers[SERVER] = dict(ENTRY)
    save_object(path, config)
    return True


def others() -> dict[str, str]:
    """The same server for other MCP clients, by client: what to run or where to put it."""
    entry = json.dumps({"mcpServers": {SERVER: {"command": "gc", "args": ["mcp"]}}}, indent=2)
    return {
        "claude-code (every project)": f"claude mcp add --scope user {SERVER} -- gc mcp",
        "codex (~/.codex/config.toml)": f'[mcp_servers.{SERVER}]\ncommand = "gc"\nargs = ["mcp"]',
        "cursor (.cursor/mcp.json)": entry,
        "gemini-cli (.gemini/settings.json)": entry,
    }
