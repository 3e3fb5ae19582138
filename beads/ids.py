"""`beads.ids`, the old path of `beads.records.ids`: it imports, with a DeprecationWarning,
for one release. Import `beads.records.ids` instead."""

import sys
import warnings

from beads.records import ids

warnings.warn("beads.ids is deprecated: import beads.records.ids", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = ids
