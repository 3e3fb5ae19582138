"""Gates: what keeps an agent from stopping, and what it waits on.

- `gates.session_gates`: per-session rules judged at a hook (markers, built-ins, registered
  checks): `gate_statuses`, `register`, `unregister`, `mark`, `clear`;
- `gates.beadgates`: beads of type `gate` that wait for a timer, a human, a mail reply, a bead
  or GitHub, then tell their waiters: `create_gate`, `check_gates`, `resolve_gate`;
- `gates.decisions`: questions to a human whose answer comes back to the requester's inbox:
  `create_decision`, `respond`, `wait_or_default`, and `check_due` (timed-out decisions
  answered with their default, then the gates checked: `gc gate check` and every hook);
- `gates.hooks`: `gc hook run`, Claude Code's hook protocol (`run_hook`), with the Stop chain
  in `gates.stop`.

The command-line groups (`gc gate`, `gc decision`, `gc hook`) are thin over these, in
`gates.cli` and `gates.hook_cli`.
"""
