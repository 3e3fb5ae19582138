"""The `gc` program: the top of the layers, the one package that knows every other.

`beads` (the store) < `inbox` (delivery) < `mail` < `gates` < `web`, `mcpserver`; this package
assembles them and nothing below names it:

- `gc_beads.entry`: the `gc` and `inbox` entry points (`[project.scripts]`), which make the
  run's `beads.runtime.Runtime` and serve `gc hook run` without click;
- `gc_beads.cli`: the click root, which maps every failure to one line and its exit code;
- `gc_beads.commands`: the command table (each layer offers its click group; loaded lazily);
- `gc_beads.settings`: every layer's settings, registered with `beads.settings.registry`;
- `gc_beads.producers`: the producer set delivery derives inbox items with;
- `gc_beads.health`: every layer's check that `gc doctor` runs (the delivery database).
"""
