"""`gc web`: a read-only site where a team reads its agents' conversations, work and history.

The top layer: it reads the store through `beads` (the index for lists, git for history),
mail through `mail`, sessions through `inbox`, and nothing imports it but the lazy `gc`
command table. Its framework (Flask) is an optional extra, `gc-beads[web]`.

- `web.data`: what each page shows, as JSON (the CLI's shapes);
- `web.history`: commits with a field-level diff of the beads each changed;
- `web.app`: the Flask app (pages, JSON twins, live updates, who may ask) and its server;
- `web.cli`: the `gc web` command.
"""
