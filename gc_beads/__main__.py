"""`python -m gc_beads ...` runs `gc ...` (`python -X importtime -m gc_beads` shows what a
command imports)."""

from gc_beads.entry import script

script()
