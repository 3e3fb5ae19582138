"""The shipped conformance suite against the fake, beadmail and an exec script, and
`gc mail conformance`, which runs it against a user's script."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from beads.store import Store
from mail.beadmail import BeadMail
from mail.conformance import CASES, EXTRAS, Result, run_case
from mail.fake import FakeProvider
from tests.conftest import GcRunner, copy_tree

# The exec protocol page's example provider, a real script as a user would write one, and
# the page's line that runs the whole suite against it (`strict_run_of_the_example`).
EXAMPLE = Path(__file__).parent.parent / "docs" / "examples" / "jsonmail"
STRICT_RUN_ARGS = ("mail", "conformance", "--strict", str(EXAMPLE))
CONFORMANCE_LINE = re.compile(r"(PASS|FAIL|SKIP) (\w+)( \(extra\))?(?:: (.*))?")


def conformance_results(stdout: str) -> dict[str, tuple[str, bool]]:
    """`gc mail conformance`'s case lines: each case's outcome (PASS, FAIL, SKIP) and whether
    it is marked `(extra)`."""
    return {name: (outcome, extra) for name, (outcome, extra, _) in case_lines(stdout).items()}


def case_lines(stdout: str) -> dict[str, tuple[str, bool, str]]:
    """As `conformance_results`, with each line's detail (why it failed or was skipped)."""
    lines = [CONFORMANCE_LINE.fullmatch(line) for line in stdout.splitlines()[1:-1]]
    assert all(lines), stdout
    return {m.group(2): (m.group(1), bool(m.group(3)), m.group(4) or "") for m in lines if m}


def strict_run_of_the_example(
    tmp_path_factory: pytest.TempPathFactory,
) -> subprocess.CompletedProcess:
    """`gc mail conformance --strict` against the exec protocol page's example provider, run
    once a test run: its case lines are the exec provider's results in `test_conformance` too,
    and the docs test takes it as the run of the page's line with the same argv (the suite
    sends to recipients of its own, so the directory it runs in changes nothing). The first
    test to need it runs it and the others read what it printed, from the session's temporary
    directory, or under xdist from the one the workers' temporary directories share
    (pytest-xdist's recipe for a run-once fixture)."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if "PYTEST_XDIST_WORKER" in os.environ else base) / "strict-run.json"
    with FileLock(f"{shared}.lock"):
        if not shared.exists():
            result = GcRunner(tmp_path_factory.mktemp("users-script"))(*STRICT_RUN_ARGS)
            fields = ("args", "returncode", "stdout", "stderr")
            shared.write_text(json.dumps({name: getattr(result, name) for name in fields}))
        return subprocess.CompletedProcess(**json.loads(shared.read_text()))


@pytest.fixture(scope="session")
def users_script_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess:
    return strict_run_of_the_example(tmp_path_factory)


@pytest.fixture(params=["fake", "beadmail", "exec"])
def conformance_case(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[str], Result]]:
    """The result of a case (by name) against the provider the test is parametrized with."""
    if request.param == "fake":
        fake = FakeProvider()
        yield lambda name: run_case(name, fake, "conf")
    elif request.param == "beadmail":  # a copy of a store made once (conftest)
        copy_tree(request.getfixturevalue("store_template"), tmp_path / ".beads")
        store = Store.open(tmp_path, agent="conformance")
        beadmail = BeadMail(store)
        yield lambda name: run_case(name, beadmail, "conf")
        store.close()
    else:  # every case through the exec protocol, run by `gc mail conformance --strict`
        lines = case_lines(request.getfixturevalue("users_script_run").stdout)
        outcomes = {"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}
        yield lambda name: Result(name, outcomes[lines[name][0]], lines[name][2], lines[name][1])


@pytest.mark.parametrize("name", list(CASES))
def test_conformance(conformance_case: Callable[[str], Result], name: str) -> None:
    result = conformance_case(name)
    if result.outcome == "skipped":
        pytest.skip(result.detail)
    assert result.outcome == "passed", result.detail


def test_conformance_command_against_a_users_script(
    gc: GcRunner, tmp_path: Path, users_script_run: subprocess.CompletedProcess
) -> None:
    result = users_script_run  # --strict: every case, the extras marked
    assert result.returncode == 0, result.stdout
    assert "gcconf-" in result.stdout.splitlines()[0]
    # The exec protocol carries no priority: the one case about it is skipped.
    assert result.stdout.splitlines()[-1] == f"{len(CASES) - 1} passed, 0 failed, 1 skipped"
    assert conformance_results(result.stdout) == {
        name: ("SKIP" if name == "inbox_orders_by_priority" else "PASS", name in EXTRAS)
        for name in CASES
    }
    bad = tmp_path / "bad"
    bad.write_text("#!/bin/sh\nexit 1\n")
    bad.chmod(0o755)
    failing = gc("mail", "conformance", str(bad))
    assert failing.returncode == 10 and "FAIL send_returns_matching_fields" in failing.stdout
    # By default Gas City's cases, each once, and none of the extras (--strict adds them).
    ran = conformance_results(failing.stdout)
    assert set(ran) == set(CASES) - EXTRAS and not any(extra for _o, extra in ran.values())
    answer = gc.json("mail", "conformance", str(bad))  # a "no", not an error
    assert answer["ok"] is True and answer["conforms"] is False and answer["failed"] > 0
    assert {r["name"]: r["extra"] for r in answer["results"]} == dict.fromkeys(ran, False)


def test_the_exec_protocol_page_runs_conformance_on_its_short_example_provider() -> None:
    """The exec protocol's page runs `gc mail conformance` and `--strict` against its example
    provider, a real script, and each line must exit 0 (a failed case exits 10): the docs
    test runs those lines (the --strict one is `strict_run_of_the_example`, checked case by
    case here), so the check here is that the page still holds them, to be run, and that the
    example stays short enough to read in one go."""
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
