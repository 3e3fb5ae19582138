"""The shipped conformance suite against the fake, beadmail and an exec script."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from beads.store import Store
from mail.beadmail import BeadMail
from mail.conformance import CASES, run_case
from mail.execmail import ExecMail
from mail.fake import FakeProvider
from mail.provider import Provider
from tests.conftest import GcRunner

SCRIPT = Path(__file__).parent / "mailscripts" / "jsonmail"


@pytest.fixture(params=["fake", "beadmail", "exec"])
def provider(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Provider]:
    if request.param == "fake":
        yield FakeProvider()
    elif request.param == "beadmail":  # a copy of a store made once (conftest)
        shutil.copytree(
            request.getfixturevalue("store_template"), tmp_path / ".beads", symlinks=True
        )
        store = Store.open(tmp_path, agent="conformance")
        yield BeadMail(store)
        store.close()
    else:
        monkeypatch.setenv("JSONMAIL_FILE", str(tmp_path / "mail.json"))
        yield ExecMail(str(SCRIPT))


@pytest.mark.parametrize("name", list(CASES))
def test_conformance(provider: Provider, name: str) -> None:
    result = run_case(name, provider, "conf")
    if result.outcome == "skipped":
        pytest.skip(result.detail)
    assert result.outcome == "passed", result.detail


EXAMPLE = Path(__file__).parent.parent / "docs" / "examples" / "jsonmail"


def test_the_documented_example_provider_passes_gc_mail_conformance(
    gc: GcRunner, tmp_path: Path
) -> None:
    env = {"MAIL_FILE": str(tmp_path / "mail.json")}
    core = gc.json("mail", "conformance", str(EXAMPLE), env=env)
    assert core["ok"] and core["conforms"], core
    assert len(EXAMPLE.read_text().splitlines()) <= 40  # short enough to read in one go
