"""`gc mcp`: the store as an MCP server, for every agent runtime that speaks MCP.

The top layer beside `web/`: it reaches the store through `beads`, mail and work threads
through `mail`, delivery items through `inbox` and decisions through `gates`; nothing imports
it but the lazy `gc` command table. Its one dependency, the official `mcp` SDK, is an optional
extra (`gc-beads[mcp]`); the package is not named `mcp`, which would shadow the SDK.

- `mcpserver.agentstore`: the open store of one agent, reopened when `gc doctor` replaced its
  index or packs, and every operation the tools offer, returning the CLI's `--json` objects;
- `mcpserver.tools`: the tools (names, descriptions and JSON schemas written for a model) and
  the checking of their arguments;
- `mcpserver.server`: the MCP server over stdio (the SDK's low-level server), its resources,
  errors as tool errors, waits that the client may cancel;
- `mcpserver.install`: `gc mcp install`, the project's `.mcp.json` and its equivalents;
- `mcpserver.cli`: the `gc mcp` command.
"""
