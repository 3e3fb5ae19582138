"""`beads.codec`, the old path of `beads.records.codec`: it imports, with a DeprecationWarning,
for one release. Import `beads.records.codec` instead."""

import sys
import warnings

from beads.records import codec

warnings.warn(
    "beads.codec is deprecated: import beads.records.codec", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = codec
