"""The program's command table: each layer's click group, named by module path and imported
only when its command runs (`gc --help` imports none of them)."""

from __future__ import annotations

# name -> (module, attribute, one-line help)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("beads.cli.admin", "init", "Create a store (.beads/) here or under PATH."),
    "bead": ("beads.cli.bead", "bead", "Create, show, list, change and close beads."),
    "log": ("beads.cli.admin", "log", "Show who changed what, from the store's git history."),
    "config": ("beads.cli.admin", "config", "Show or change config.yaml."),
    "doctor": ("beads.cli.admin", "doctor", "Check the store and repair derived files."),
    "trust": ("beads.cli.trust", "trust", "Approve synced settings that run programs here."),
    "remote": ("beads.cli.sync", "remote", "Add, remove and list remotes (other machines)."),
    "clone": ("beads.cli.sync", "clone", "Make a store here from a store on a remote."),
    "sync": ("beads.cli.sync", "sync", "Fetch, merge and push the store with a remote."),
    "mail": ("mail.cli", "mail", "Send, read, reply to and archive mail between agents."),
    "inbox": ("inbox.cli", "inbox", "Push, list, drain and wait for delivery items."),
    "session": ("inbox.cli", "session", "Agent sessions as the hooks report them."),
    "nats": ("inbox.nats.cli", "nats_group", "Real-time delivery across machines (NATS)."),
    "hook": ("gates.hook_cli", "hook", "Claude Code hooks: run an event, install the entries."),
    "gate": ("gates.cli", "gate", "Session gates and bead gates: register, mark, check, resolve."),
    "decision": ("gates.cli", "decision", "Ask a human; the answer comes back to your inbox."),
    "thread": (
        "mail.threads.cli",
        "thread",
        "Work threads: claim with leases, report, wait-reply.",
    ),
    "skill": ("mail.threads.skills", "skill", "Install SKILL.md files that teach agents gc."),
    "web": ("web.cli", "web", "Serve a read-only site of the store for the team (gc-beads[web])."),
    "mcp": ("mcpserver.cli", "mcp", "Serve the store to agents over MCP (gc-beads[mcp])."),
}

# Programs other than `gc` served by the entry point: name -> (module, root group).
PROGRAMS: dict[str, tuple[str, str]] = {"inbox": ("mail.threads.inboxcli", "inbox")}

# Exact argument lists of `gc` served without click: Claude Code runs `gc hook run` on every
# prompt and every stop, and importing click alone costs about as much as the hook's own
# work. Exact arguments -> (module, function returning the exit code, called with
# `prepare`: what to set up before an event that drains).
DIRECT: dict[tuple[str, ...], tuple[str, str]] = {
    ("hook", "run"): ("gates.hookrun", "main"),
    ("hook", "run", "--event", "PreToolUse"): ("gates.hookrun", "main_pretooluse"),
}
