"""`beads.record`, the old path of `beads.records.record`: it imports, with a DeprecationWarning,
for one release. Import `beads.records.record` instead."""

import sys
import warnings

from beads.records import record

warnings.warn(
    "beads.record is deprecated: import beads.records.record", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = record
