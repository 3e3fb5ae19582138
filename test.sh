#!/usr/bin/env bash
# The test suite, as CI runs it: make or reuse .venv, install the project with its test
# extras, make sure the browser the `gc web` tests drive is there when we may install it,
# then run pytest with this script's arguments.
set -euo pipefail
cd "$(dirname "$0")"

# The browser tests (tests/test_web.py) drive Debian's Chromium through its WebDriver. Install
# it when missing and we may: as root, or under CI=true (with sudo). Otherwise those tests skip,
# and we say so once; under CI=true they never skip.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    if [ "$(id -u)" = 0 ] || [ "${CI:-}" = true ]; then
        as_root=$([ "$(id -u)" = 0 ] || echo sudo)
        $as_root apt-get update -qq
        $as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq chromium chromium-driver >/dev/null
    else
        echo "test.sh: chromium and chromium-driver are missing: the browser tests are skipped" \
            "(run as root or with CI=true to install them)" >&2
    fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
# A fresh .venv gets the package as built (what users install); one a developer installed
# editable (`pip install -e`) stays editable, so it keeps running the checkout's code.
editable=$(.venv/bin/python - <<'PY'
from importlib import metadata
try:
    print("-e" if '"editable": true' in (metadata.distribution("gc-beads").read_text("direct_url.json") or "") else "")
except metadata.PackageNotFoundError:
    print("")
PY
)
.venv/bin/python -m pip install -q $editable '.[test]'
exec .venv/bin/python -m pytest "$@"
