"""`beads.config`, the old path of `beads.settings.config`: it imports, with a DeprecationWarning,
for one release. Import `beads.settings.config` instead."""

import sys
import warnings

from beads.settings import config

warnings.warn(
    "beads.config is deprecated: import beads.settings.config", DeprecationWarning, stacklevel=2
)
sys.modules[__name__] = config
