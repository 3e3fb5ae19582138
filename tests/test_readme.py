"""The documentation's Python examples run as written, in a fresh store."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from beads.store import Store

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = [
    (page, block)
    for page in PAGES
    for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL)
]


def test_the_guides_hold_python_examples() -> None:
    assert {page.name for page, _block in EXAMPLES} >= {"store.md", "mail.md", "delivery.md"}


@pytest.mark.parametrize(
    ("page", "block"), EXAMPLES, ids=[f"{page.name}-{n}" for n, (page, _) in enumerate(EXAMPLES)]
)
def test_a_python_example_of_the_docs_runs(tmp_path: Path, page: Path, block: str) -> None:
    Store.init(tmp_path)[0].close()
    result = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, f"{page.name}:\n{block}\n{result.stderr}"
