"""Does the suite flake under load? Full runs in shuffled order, and named tests many times.

    python bench/bench_flaky.py --second /path/to/other/checkout [--runs 5] [--repeat 50]

While another checkout's suite runs over and over beside it (the load a shared CI machine or
a busy laptop gives), this runs the README's test command (`./test.sh`) `--runs` times, each
in an order shuffled by a new seed (`--shuffle SEED`, tests/conftest.py), then each test named
by `--test` (default: the tests once seen to flake) `--repeat` times in one pytest process
(pytest-repeat's `--count`). It prints every run's result, the load average it ran under, and
the failures with the seed that reproduces them. Exit 0 only when nothing failed.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Tests that failed once on a 2-core machine, under load or run alone (an order they
# depended on); each must now pass every time.
ONCE_FLAKY = [
    "tests/test_nats.py::test_a_relay_stops_at_once_on_sigterm_even_while_connecting",
    "tests/test_store_repack.py::test_many_writes_keep_the_packs_geometric_and_few",
    "tests/test_cli_bad_input.py::test_ctrl_c_early_never_shows_a_traceback_of_gc",
    "tests/test_threads.py::"
    "test_a_waiters_event_cursor_wakes_once_for_the_new_answer_whatever_befalls_the_index",
    "tests/test_hooks_time_budgets.py::test_session_gate_checks_of_one_stop_share_one_budget",
    "tests/test_store_concurrency.py::test_eight_processes_creating_beads_at_once",
    "tests/test_mail_exec.py::test_gc_ended_by_sigterm_ends_the_mail_program_it_was_running",
    "tests/test_nats.py::test_relay_killed_mid_stream_delivers_every_item_exactly_once",
    "tests/test_cli_bad_input.py::test_sigterm_ends_a_wait_in_one_line_with_exit_143",
    "tests/test_sync_guarded_settings.py::"
    "test_a_nudge_command_from_the_remote_is_not_run_until_approved",
    "tests/test_nats.py::test_a_relay_whose_fifo_is_removed_listens_on_a_new_one",
    "tests/test_web.py::"
    "test_a_search_holding_a_bidi_control_keeps_it_in_the_box_and_finds_the_same_again",
    "tests/test_cli.py::test_a_command_that_waits_gets_the_collectors_usual_thresholds_back",
    "tests/test_delivery_never_lost_nor_invented.py::"
    "test_inbox_wait_wakes_for_an_item_pushed_after_its_database_was_removed",
    "tests/test_sync.py::"
    "test_racing_claims_on_separate_machines_end_in_one_winner_and_clean_conflicts",
]


def load_average() -> float:
    return os.getloadavg()[0]


def summary(output: str) -> str:
    """pytest's last line: "N passed, M failed in S s"."""
    lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return lines[-1].strip("= ") if lines else output.strip().splitlines()[-1:][0]


def failures(output: str) -> list[str]:
    return sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE)))


def find_tests(names: list[str]) -> list[str]:
    """The node ids of `names` that exist in this checkout (a test renamed or moved is found
    by its function name)."""
    found = []
    for name in names:
        function = name.split("::")[-1]
        listed = subprocess.run(
            [
                str(ROOT / ".venv/bin/python"),
                "-m",
                "pytest",
                "-q",
                "--co",
                "-n0",
                "-k",
                function,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout
        found += [line for line in listed.splitlines() if "::" in line and function in line]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--second",
        type=Path,
        required=True,
        help="another checkout with its own .venv: its suite runs beside",
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--test", action="append", help="a test to repeat (node id)")
    args = parser.parse_args()

    # A kill (SIGTERM) ends the bench through its `finally`, which stops the second suite's
    # loop: Python's default would leave that loop running.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    second = subprocess.Popen(
        [
            "bash",
            "-c",
            "while true; do .venv/bin/python -m pytest -q -p no:cacheprovider "
            ">/dev/null 2>&1; done",
        ],
        cwd=args.second,
        start_new_session=True,
    )
    failed: list[str] = []
    try:
        time.sleep(20)  # let the second suite reach its stride
        for run in range(1, args.runs + 1):
            seed = random.randrange(1, 2**31)
            start, load_before = time.monotonic(), load_average()
            done = subprocess.run(
                ["./test.sh", "-q", "-p", "no:cacheprovider", f"--shuffle={seed}"],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            print(
                f"run {run}: --shuffle={seed}: {summary(done.stdout)} "
                f"({time.monotonic() - start:.0f} s, load {load_before:.1f} -> "
                f"{load_average():.1f})",
                flush=True,
            )
            for test in failures(done.stdout):
                print(f"  failed: {test}", flush=True)
                failed.append(f"{test} (--shuffle={seed})")
            if done.returncode and not failures(done.stdout):
                failed.append(f"run {run} exited {done.returncode}")
        # pytest-repeat renames `test[param]` to `test[param-1-50]`, so a parametrized test
        # is named without its parameters and each of them runs --repeat times.
        found = find_tests(args.test or ONCE_FLAKY)
        for test in dict.fromkeys(node.split("[")[0] for node in found):
            runs = args.repeat * sum(node.split("[")[0] == test for node in found)
            done = subprocess.run(
                [
                    str(ROOT / ".venv/bin/python"),
                    "-m",
                    "pytest",
                    "-q",
                    "-n0",
                    "-p",
                    "no:cacheprovider",
                    f"--count={args.repeat}",
                    test,
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            said = summary(done.stdout)
            counts = {
                word: int(number)
                for number, word in re.findall(r"(\d+) (passed|failed|error)", said)
            }
            good = counts.get("passed", 0)
            # Every parameter runs, whichever were named: what pytest ran is the count, and
            # a run that ran less than was asked (a test not found) fails too.
            runs = max(runs, sum(counts.values()))
            print(f"{test}: {good}/{runs} passed (load {load_average():.1f})", flush=True)
            for repeat in failures(done.stdout):
                print(f"  failed: {repeat}", flush=True)
            failed += [test] * (runs - good)
    finally:
        os.killpg(second.pid, 15)
        second.wait()
    print(f"failures: {len(failed)}")
    for failure in failed:
        print(f"  {failure}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
