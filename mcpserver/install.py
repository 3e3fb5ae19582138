"""`gc mcp install`: the project's MCP configuration for Claude Code (`.mcp.json`), and the
same server for other clients.

The entry runs `gc mcp` found on PATH and names no agent and no path of this machine: the
file is committed with the project and each session's environment says who acts
(`$GC_ALIAS`, `$GC_SESSION_ID`, `$GC_AGENT`). Idempotent; everything else the file holds is
kept; the file is replaced atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from beads.errors import InvalidInput, StorageError

SERVER = "gc-beads"
ENTRY: dict[str, Any] = {"type": "stdio", "command": "gc", "args": ["mcp"]}
FILE = ".mcp.json"


def install(path: Path) -> bool:
    """Put the `gc-beads` server in the `mcpServers` of the JSON file at `path` (made if
    missing); True when the file changed."""
    config = _load(path)
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InvalidInput(f"{path}: 'mcpServers' must be an object")
    if servers.get(SERVER) == ENTRY:
        return False
    servers[SERVER] = dict(ENTRY)
    _save(path, config)
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


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {path}: {exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc}); fix it first") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} must hold a JSON object")
    return data


def _save(path: Path, config: dict[str, Any]) -> None:
    """Replace `path` atomically, keeping its mode (a new file gets the umask's)."""
    if not path.parent.is_dir():  # a path the user gave: their mistake, not the disk's
        raise InvalidInput(f"cannot write {path}: no directory {path.parent}")
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        mode = 0o666 & ~umask
    temp = None
    try:
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(config, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError as exc:
        if temp is not None:  # never leave a half-written copy beside the user's file
            Path(temp).unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None
