"""`beads.query`, the old path of `beads.index.query`: it imports, with a DeprecationWarning,
for one release. Import `beads.index.query` instead."""

import sys
import warnings

from beads.index import query

warnings.warn(
    "beads.query is deprecated: import beads.index.query", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = query
