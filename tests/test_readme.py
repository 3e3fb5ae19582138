"""The README's Python examples run as written, in a fresh store."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from beads.store import Store

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_examples_run(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert len(blocks) >= 3
    Store.init(tmp_path)[0].close()
    for block in blocks:
        result = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                                text=True, timeout=120)  # fmt: skip
        assert result.returncode == 0, f"{block}\n{result.stderr}"
