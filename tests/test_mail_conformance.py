"""The shipped conformance suite against the fake, beadmail and an exec script."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from beads.store import Store
from mail.beadmail import BeadMail
from mail.conformance import CASES, Result, run, run_case
from mail.execmail import ExecMail
from mail.fake import FakeProvider

SCRIPT = Path(__file__).parent / "mailscripts" / "jsonmail"


@pytest.fixture(scope="module")
def exec_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    """Every case, the extras too, run once against the real jsonmail script through one
    provider, as `gc mail conformance --strict` runs them: each case has recipients of its
    own, so they share a mailbox (and the one `ensure-running` of a provider)."""
    mailbox = tmp_path_factory.mktemp("jsonmail") / "mail.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JSONMAIL_FILE", str(mailbox))
        return {r.name: r for r in run(ExecMail(str(SCRIPT)), "conf", strict=True)}


@pytest.fixture(params=["fake", "beadmail", "exec"])
def conformance_case(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[str], Result]]:
    """The result of a case (by name) against the provider the test is parametrized with."""
    if request.param == "fake":
        fake = FakeProvider()
        yield lambda name: run_case(name, fake, "conf")
    elif request.param == "beadmail":  # a copy of a store made once (conftest)
        shutil.copytree(
            request.getfixturevalue("store_template"), tmp_path / ".beads", symlinks=True
        )
        store = Store.open(tmp_path, agent="conformance")
        beadmail = BeadMail(store)
        yield lambda name: run_case(name, beadmail, "conf")
        store.close()
    else:
        yield request.getfixturevalue("exec_results").__getitem__


@pytest.mark.parametrize("name", list(CASES))
def test_conformance(conformance_case: Callable[[str], Result], name: str) -> None:
    result = conformance_case(name)
    if result.outcome == "skipped":
        pytest.skip(result.detail)
    assert result.outcome == "passed", result.detail


EXAMPLE = Path(__file__).parent.parent / "docs" / "examples" / "jsonmail"


def test_the_documented_example_provider_passes_gc_mail_conformance() -> None:
    """The exec protocol's page runs `gc mail conformance` and `--strict` against its example
    provider, each a real `gc` process that must exit 0 (it would exit 10 on a failed case):
    test_docs_examples runs those lines; here, that the page still holds them, run."""
    from tests.test_docs_examples import ALL_COMMANDS, EXIT_COMMENT

    run_lines = [
        shlex.split(c.text, comments=True)
        for c in ALL_COMMANDS
        if c.where.startswith("exec-protocol.md:")
        and c.not_run is None
        and not EXIT_COMMENT.search(c.text)
    ]
    example = "docs/examples/jsonmail"
    assert ["gc", "mail", "conformance", example] in run_lines
    assert ["gc", "mail", "conformance", "--strict", example] in run_lines
    assert len(EXAMPLE.read_text().splitlines()) <= 40  # short enough to read in one go
