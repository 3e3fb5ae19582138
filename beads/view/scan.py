"""The view as `gc doctor` checks it: its files, its links and each file's blob id, found by
a child process while the doctor brings the index up to date (at 100k files, walking and
reading the view costs about two seconds of CPU, most of it in the kernel).

A module of its own, light to import: the child imports it and nothing else of gc's but the
view.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from beads.files import checking
from beads.view.view import View, git_blob_sha

SCAN_AHEAD_FILES = 5000  # HEAD files from which `ViewScan` works in the background


class ViewScan:
    """The view's files and links (`View.scan`) and each file's blob id, found in the
    background by a child process while the caller goes on (walking and reading a 100k-file
    view costs two seconds, most of them in the kernel): `result()` waits for them.

    For a store of fewer than `SCAN_AHEAD_FILES` files (`size`), or when no child can run,
    the view is walked in this process when `result()` asks, and nothing is read ahead
    (starting a child costs more than reading a few thousand files)."""

    def __init__(self, root: Path, size: int) -> None:
        self.root = root
        self._out: bytes | None = None
        self._thread: threading.Thread | None = None
        if size < SCAN_AHEAD_FILES or not sys.executable:
            return
        env = dict(os.environ)  # the child imports this very package, wherever it is
        home = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [home, env.get("PYTHONPATH")]))
        try:
            child = subprocess.Popen(
                [sys.executable, "-c", "from beads.view.scan import _scan_child; _scan_child()",
                 str(root)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=env,
            )  # fmt: skip
        except OSError:
            return

        def run() -> None:
            out = child.communicate()[0]
            self._out = out if child.returncode == 0 else None

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def result(self) -> tuple[list[str], list[str], dict[str, bytes]]:
        """The view's files, its links (sorted), and path -> blob id of the files read ahead."""
        if self._thread is not None:
            self._thread.join()
        fields = (self._out or b"").split(b"\0")
        try:
            if fields[-2:] != [b"end", b""]:  # no child, or it failed
                raise ValueError("no scan")
            count = int(fields[0])
            links = [os.fsdecode(path) for path in fields[1 : count + 1]]
            rest = fields[count + 1 : -2]
            files = [os.fsdecode(path) for path in rest[::2]]
            hashed = zip(files, rest[1::2], strict=True)
            return files, links, {path: sha for path, sha in hashed if sha}
        except ValueError:  # walked here instead
            files, links = View(self.root, self.root / ".runtime").scan()
            return files, links, {}


def _scan_child() -> None:
    """`ViewScan`'s child: argv holds the store's root; prints the count of links, the
    links, each file with its blob id (empty if it could not be read), and "end"."""
    root = Path(sys.argv[1])
    view = View(root, root / ".runtime")
    files, links = view.scan()
    fields = [str(len(links)).encode(), *map(os.fsencode, links)]
    with checking():  # one pass over every file: each directory checked once
        for path in files:
            data = view.read(path)
            fields += [os.fsencode(path), b"" if data is None else git_blob_sha(data)]
    sys.stdout.buffer.write(b"\0".join([*fields, b"end", b""]))
