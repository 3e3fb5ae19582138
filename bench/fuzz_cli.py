"""Hostile inputs through the real `gc`: every option and argument of every command.

    python bench/fuzz_cli.py [--count 2000] [--seed 1]

Runs `gc` as a subprocess (undecodable bytes go into argv as raw bytes) on a fresh store, for
every parameter of the click tree (tests/test_cli_hostile_values.py enumerates them) with the worst
known values and random ones, and prints: inputs, tracebacks, exit-50s (both should be 0),
other unexpected exits, rejected inputs that changed the store, and runs that were still
waiting at the time limit (accepted values such as a long `--timeout`).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import gc_program  # noqa: E402
from tests.test_cli_hostile_values import PARAMS, WORST, build_argv  # noqa: E402


def random_value(rng: random.Random) -> str:
    """A value of one of the shapes that broke gc: numbers, surrogates, specs, size."""
    kind = rng.randrange(6)
    if kind == 0:
        return str(rng.choice([-1, 1]) * rng.randrange(10 ** rng.randrange(1, 60)))
    if kind == 1:
        return "".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(8))) + "\udcff"
    if kind == 2:
        return f"{rng.randrange(10**20)}{rng.choice(['', 'ms', 's', 'm', 'h', 'd', 'w'])}"
    if kind == 3:
        return "{" + rng.choice(["text", "session", "agent", "0"]) + f":>{rng.randrange(10**10)}}}"
    if kind == 4:
        return rng.choice("[{&*!|>%@") * rng.randrange(1, 20_000)
    return "".join(chr(rng.randrange(0, 0x110000)) for _ in range(rng.randrange(1, 40)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000, help="inputs to run (default 2000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per run")
    options = parser.parse_args()
    rng = random.Random(options.seed)
    program = gc_program()
    home = Path(tempfile.mkdtemp(prefix="gc-fuzz-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    env.update(GC_BEADS_DIR=str(home), EDITOR="true")
    env.pop("VISUAL", None)

    def raw(arg: str) -> bytes:
        """The bytes a shell would pass: \udc80-\udcff as the bytes they stand for, other
        surrogates as their (invalid) UTF-8; NUL cannot be in an argument at all."""
        arg = arg.replace("\x00", "")
        try:
            return arg.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return arg.encode("utf-8", "surrogatepass")

    def gc(args: list[str]) -> subprocess.CompletedProcess[bytes]:
        argv = [os.fsencode(program), *(raw(a) for a in args)]
        return subprocess.run(
            argv, cwd=home, env=env, capture_output=True, timeout=options.timeout, check=False
        )

    def made(*args: str) -> dict:
        return json.loads(gc([*args, "--json"]).stdout)

    def head() -> str:
        git_dir = home / ".beads" / ".git"
        found = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"],
                               capture_output=True, text=True)  # fmt: skip
        return found.stdout.strip()

    gc(["init"])
    ids = {
        "bead": made("bead", "create", "--type", "task", "--title", "t")["bead"]["id"],
        "message": made("mail", "send", "dog", "-s", "hi", "-m", "x")["message"]["id"],
        "gate": made("gate", "create", "--await", "human")["bead"]["id"],
        "decision": made("decision", "create", "--prompt", "p", "--option", "a", "--option", "b")[
            "bead"
        ]["id"],
    }
    counts: collections.Counter[str] = collections.Counter()
    codes: collections.Counter[int] = collections.Counter()
    examples: dict[str, str] = {}
    started = time.monotonic()
    for number in range(options.count):
        path, target = PARAMS[number % len(PARAMS)]
        turn = number // len(PARAMS)
        value = WORST[turn] if turn < len(WORST) else random_value(rng)
        argv = build_argv(ids, path, target, value)
        before = head()
        counts["inputs"] += 1
        try:
            result = gc(argv)
        except subprocess.TimeoutExpired:
            counts["waiting at the time limit"] += 1
            continue
        err = result.stderr.decode("utf-8", "replace")
        codes[result.returncode] += 1
        line = f"gc {' '.join(a[:30] for a in argv)!r}: {err.strip()[:300]}"
        if "Traceback" in err:
            counts["tracebacks"] += 1
            examples.setdefault("traceback", line)
        if result.returncode == 50:
            counts["exit 50"] += 1
            examples.setdefault("exit 50", line)
        elif result.returncode not in (0, 10, 30, 40):
            counts["other exits"] += 1
            examples.setdefault(f"exit {result.returncode}", line)
        if result.returncode in (30, 40) and head() != before:
            counts["rejected but the store changed"] += 1
            examples.setdefault("changed", line)
        if (number + 1) % 200 == 0:
            print(f"  {number + 1} inputs, {time.monotonic() - started:.0f}s", file=sys.stderr)
    print(f"inputs: {counts['inputs']} over {len(PARAMS)} parameters")
    print(f"tracebacks: {counts['tracebacks']}")
    print(f"exit 50: {counts['exit 50']}")
    print(f"other unexpected exits: {counts['other exits']}")
    print(f"rejected but the store changed: {counts['rejected but the store changed']}")
    print(f"waiting at the time limit: {counts['waiting at the time limit']}")
    print(f"exit codes: {dict(sorted(codes.items()))}")
    for kind, line in examples.items():
        print(f"first {kind}: {line}")
    print(f"time: {time.monotonic() - started:.0f}s")


if __name__ == "__main__":
    main()
