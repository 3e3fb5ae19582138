#!/usr/bin/env python
"""A soak standing for four machines on this one: correctness under kills, not speed.

Run from the project root (needs `git`, for `git daemon`, and the `nats-server` of the test
extra):

    python bench/bench_soak.py                 # 4 machines, 10 minutes
    python bench/bench_soak.py --minutes 1     # a short run

Four stores (`gc clone` of one remote served by a real `git daemon`), one real `nats-server`
with JetStream, and on each machine, all through the `gc` program in subprocesses:
  - a writer sending mail to the agents of every machine (`gc mail send --json`),
  - a pusher pushing plain items to them (`gc inbox push --dedup`), carried by NATS,
  - a claimer racing for a shared pool of work threads (`gc thread claim`),
  - a syncer (`gc sync` every second or so), killed with SIGKILL now and then,
  - the machine's relay (`gc nats relay`), killed with SIGKILL now and then and restarted.

Then everything is stopped, the relays restarted and the machines synced in turn, and the
script checks and prints:
  - convergence: every machine's branch names the same commit;
  - acknowledged writes lost: mail a `gc mail send` acknowledged (exit 0) and missing from any
    machine;
  - double confirmed leases: a thread two claimers were both told they hold (exit 0 of
    `gc thread claim`; nobody releases, leases outlast the run);
  - items lost or doubled: each acknowledged push drained by its agent's machine exactly once.

Everything happens in a temporary directory that is removed at the end (`--keep` keeps it).
Exit status 0 when every check passes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
GC = str(BIN / "gc")
TASKS = 24
LEASE_SECONDS = 3600  # outlasts the run: a second confirmed holder is always a double


def log(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited at start")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{what} did not start within 15 s")


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GC_")}


def gc(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GC, *args], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout
    )


def must(*args: str, cwd: Path, timeout: float = 120) -> dict[str, Any]:
    done = gc(*args, "--json", cwd=cwd, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"gc {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout) if done.stdout.strip() else {}


class Machine:
    """One store with its relay; `index` names its agent `agent-<index>`."""

    def __init__(self, index: int, root: Path) -> None:
        self.index = index
        self.dir = root
        self.agent = f"agent-{index}"
        self.relay: subprocess.Popen[bytes] | None = None
        self.log = root.parent / f"relay-{index}.log"
        self.lock = threading.Lock()

    def start_relay(self) -> None:
        with self.lock:
            with open(self.log, "ab") as out:
                self.relay = subprocess.Popen(
                    [GC, "nats", "relay", "--ack-wait", "2s"],
                    cwd=self.dir, env=clean_env(), stdout=out, stderr=out,
                )  # fmt: skip

    def kill_relay(self) -> None:
        with self.lock:
            if self.relay is not None and self.relay.poll() is None:
                self.relay.kill()
                self.relay.wait()
            self.relay = None

    def stop_relay(self) -> None:
        with self.lock:
            if self.relay is not None and self.relay.poll() is None:
                self.relay.terminate()
                try:
                    self.relay.wait(20)
                except subprocess.TimeoutExpired:
                    self.relay.kill()
                    self.relay.wait()
            self.relay = None

    def head(self) -> str:
        done = subprocess.run(
            ["git", "-C", str(self.dir / ".beads"), "rev-parse", "refs/heads/main"],
            capture_output=True, text=True,
        )  # fmt: skip
        return done.stdout.strip()


class Ledger:
    """What the workers were told succeeded, and what went wrong on the way."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.mail: list[tuple[int, str]] = []  # (sender machine, bead id)
        self.pushes: list[tuple[int, str]] = []  # (recipient machine, dedup key)
        self.claims: dict[str, list[str]] = {}  # thread id -> agents told they hold it
        self.exits: Counter[str] = Counter()
        self.odd: list[str] = []
        self.samples: dict[str, list[str]] = {}  # a few stderr lines of each failing kind

    def note(self, what: str, done: subprocess.CompletedProcess[str]) -> None:
        with self.lock:
            kind = f"{what} exit {done.returncode}"
            self.exits[kind] += 1
            if done.returncode > 0 and len(self.samples.setdefault(kind, [])) < 3:
                self.samples[kind].append(done.stderr.strip()[:200])
            # Nothing stops the remote: a sync or claim that fails with 50 (storage error)
            # rather than ending in a clean conflict (20) is a finding, as is any other code.
            if done.returncode not in (0, 10, 20, -9):
                self.odd.append(f"{what}: exit {done.returncode}: {done.stderr.strip()[:200]}")
            if "Traceback" in done.stderr:
                self.odd.append(f"{what}: traceback: {done.stderr.strip()[-300:]}")


def worker_loop(stop: threading.Event, pause: tuple[float, float], body: Any) -> None:
    rng = random.Random()
    n = 0
    while not stop.is_set():
        n += 1
        try:
            body(rng, n)
        except subprocess.TimeoutExpired:
            pass
        stop.wait(rng.uniform(*pause))


def writer(m: Machine, machines: list[Machine], ledger: Ledger) -> Any:
    def body(rng: random.Random, n: int) -> None:
        to = rng.choice(machines).agent
        done = gc("mail", "send", "--agent", m.agent, "--to", to, "-s", f"soak {m.index}.{n}",
                  "-m", f"body {m.index}.{n}", "--json", cwd=m.dir)  # fmt: skip
        ledger.note("mail send", done)
        if done.returncode == 0:
            ids = [msg["id"] for msg in json.loads(done.stdout).get("messages", [])]
            ids = ids or [json.loads(done.stdout)["id"]]
            with ledger.lock:
                ledger.mail += [(m.index, bead) for bead in ids]

    return body


def pusher(m: Machine, machines: list[Machine], ledger: Ledger) -> Any:
    def body(rng: random.Random, n: int) -> None:
        target = rng.choice(machines)
        key = f"soak-{m.index}-{n}"
        done = gc("inbox", "push", "--agent", m.agent, "--to", target.agent, "--type", "alert",
                  "--dedup", key, f"push {m.index}.{n}", "--json", cwd=m.dir)  # fmt: skip
        ledger.note("inbox push", done)
        if done.returncode == 0:
            with ledger.lock:
                ledger.pushes.append((target.index, key))

    return body


def claimer(m: Machine, tasks: list[str], ledger: Ledger) -> Any:
    def body(rng: random.Random, n: int) -> None:
        thread = rng.choice(tasks)
        done = gc("thread", "claim", "--agent", m.agent, "--thread", thread,
                  "--lease-seconds", str(LEASE_SECONDS), "--json", cwd=m.dir)  # fmt: skip
        ledger.note("thread claim", done)
        if done.returncode == 0:
            with ledger.lock:
                ledger.claims.setdefault(thread, []).append(m.agent)

    return body


def syncer(m: Machine, ledger: Ledger) -> Any:
    def body(rng: random.Random, n: int) -> None:
        process = subprocess.Popen(
            [GC, "sync"], cwd=m.dir, env=clean_env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        killed = rng.random() < 0.15
        try:
            out, err = process.communicate(timeout=rng.uniform(0.05, 0.6) if killed else 120)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        ledger.note("sync", subprocess.CompletedProcess([], process.returncode, out, err))

    return body


def chaos(machines: list[Machine], stop: threading.Event, ledger: Ledger) -> None:
    rng = random.Random()
    while not stop.wait(rng.uniform(2, 6)):
        victim = rng.choice(machines)
        victim.kill_relay()
        with ledger.lock:
            ledger.exits["relay killed"] += 1
        stop.wait(rng.uniform(0.2, 2))
        victim.start_relay()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--machines", type=int, default=4)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gc-soak-"))
    procs: list[subprocess.Popen[bytes]] = []
    machines: list[Machine] = []
    try:
        # The remote, served by a real git daemon.
        srv = tmp / "srv"
        srv.mkdir()
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(srv / "shared.git")],
                       check=True)  # fmt: skip
        port = free_port()
        daemon = subprocess.Popen(
            ["git", "daemon", "--export-all", "--enable=receive-pack", "--reuseaddr",
             f"--base-path={srv}", "--listen=127.0.0.1", f"--port={port}", str(srv)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(daemon)
        wait_port(port, daemon, "git daemon")
        url = f"git://127.0.0.1:{port}/shared.git"

        # The NATS server.
        nats_port = free_port()
        nats_bin = str(BIN / "nats-server") if (BIN / "nats-server").exists() else "nats-server"
        with open(tmp / "nats.log", "ab") as out:
            nats = subprocess.Popen(
                [nats_bin, "-a", "127.0.0.1", "-p", str(nats_port), "-js",
                 "-sd", str(tmp / "jetstream")], stdout=out, stderr=out,
            )  # fmt: skip
        procs.append(nats)
        wait_port(nats_port, nats, "nats-server")
        nats_url = f"nats://127.0.0.1:{nats_port}"

        # The machines: the first makes the store and pushes it, the others clone it.
        first = tmp / "m0"
        first.mkdir()
        must("init", ".", cwd=first)
        must("remote", "add", "origin", url, cwd=first)
        must("sync", cwd=first)
        machines.append(Machine(0, first))
        for i in range(1, args.machines):
            must("clone", url, str(tmp / f"m{i}"), cwd=tmp)
            machines.append(Machine(i, tmp / f"m{i}"))
        for m in machines:
            for key, value in (
                ("delivery.nats.url", nats_url),
                ("delivery.nats.agents", json.dumps([m.agent])),
                ("delivery.nats.machine", f"soak-{m.index}"),
            ):
                must("config", "set", "--local", key, value, cwd=m.dir)
        must("nats", "setup", cwd=first)
        for m in machines:
            must("nats", "setup", cwd=m.dir)
            m.start_relay()

        # The work: a pool of threads every claimer races for.
        tasks = [
            must("thread", "send", "--from", "lead", "--subject", f"task {k}", cwd=first)["thread"][
                "thread_id"
            ]
            for k in range(TASKS)
        ]
        must("sync", cwd=first)
        for m in machines[1:]:
            must("sync", cwd=m.dir)

        ledger = Ledger()
        stop = threading.Event()
        workers = [threading.Thread(target=chaos, args=(machines, stop, ledger))]
        for m in machines:
            for body, pause in (
                (writer(m, machines, ledger), (0.1, 0.5)),
                (pusher(m, machines, ledger), (0.1, 0.5)),
                (claimer(m, tasks, ledger), (1.0, 4.0)),
                (syncer(m, ledger), (0.5, 1.5)),
            ):
                workers.append(threading.Thread(target=worker_loop, args=(stop, pause, body)))
        log(f"{args.machines} machines, {len(workers)} workers, {args.minutes} min")
        for w in workers:
            w.start()
        deadline = time.monotonic() + args.minutes * 60
        while time.monotonic() < deadline:
            time.sleep(min(10.0, max(0.0, deadline - time.monotonic())))
            with ledger.lock:
                log(f"mail {len(ledger.mail)}, pushes {len(ledger.pushes)}, "
                    f"claims {sum(map(len, ledger.claims.values()))}")  # fmt: skip
        stop.set()
        for w in workers:
            w.join()

        # Quiesce: every relay up, then syncs in turn until every branch agrees.
        for m in machines:
            if m.relay is None or m.relay.poll() is not None:
                m.start_relay()
        converged = False
        for _round in range(6):
            for m in machines:
                gc("sync", cwd=m.dir)
            heads = {m.head() for m in machines}
            if len(heads) == 1:
                converged = True
                break
        # Let the relays publish their outboxes and take in what the stream holds.
        settle = time.monotonic() + 60
        while time.monotonic() < settle:
            pending = 0
            for m in machines:
                status = gc("nats", "status", "--json", cwd=m.dir)
                if status.returncode == 0:
                    pending += int(json.loads(status.stdout).get("outbox") or 0)
            if pending == 0:
                break
            time.sleep(1)
        time.sleep(5)  # the relays' last batch in flight

        # Checks.
        lost_mail = 0
        ids = sorted({bead for _, bead in ledger.mail})
        for m in machines:
            listed = must("bead", "list", "--type", "message", "--all", cwd=m.dir)
            present = {bead["id"] for bead in listed.get("beads", [])}
            lost_mail += sum(1 for bead in ids if bead not in present)
        doubles = {t: holders for t, holders in ledger.claims.items() if len(holders) > 1}
        wrong_holder = 0
        for thread, holders in ledger.claims.items():
            shown = must("thread", "show", "--thread", thread, cwd=first)["thread"]
            if shown.get("assigned_to") not in holders[:1]:
                wrong_holder += 1
        drained: dict[int, Counter[str]] = {}
        for m in machines:
            counts: Counter[str] = Counter()
            for _ in range(200):
                done = must("inbox", "drain", "--session", f"soak-{m.index}", "--agent", m.agent,
                            cwd=m.dir)  # fmt: skip
                items = done.get("items", [])
                if not items:
                    break
                counts.update(item["key"] for item in items if item["key"].startswith("soak-"))
            drained[m.index] = counts
        expected = Counter(ledger.pushes)
        lost_items = sum(1 for (i, key) in expected if drained[i][key] == 0)
        doubled_items = sum(1 for counts in drained.values() for n in counts.values() if n > 1)

        print(f"machines: {args.machines}, minutes: {args.minutes}")
        claimed = sum(map(len, ledger.claims.values()))
        print(f"work: mail acknowledged {len(ids)}, pushes acknowledged {len(expected)}, "
              f"confirmed claims {claimed} of {TASKS} threads")  # fmt: skip
        print("exits: " + ", ".join(f"{k}: {v}" for k, v in sorted(ledger.exits.items())))
        checks = {
            "converged": converged,
            "acknowledged writes lost": lost_mail,
            "double confirmed leases": len(doubles),
            "holder differs from the confirmed claimer": wrong_holder,
            "items lost": lost_items,
            "items doubled": doubled_items,
            "odd exits or tracebacks": len(ledger.odd),
        }
        ok = converged and not any(v for k, v in checks.items() if k != "converged")
        for name, value in checks.items():
            print(f"{name}: {value}")
        for kind, lines in sorted(ledger.samples.items()):
            for line in lines:
                print(f"  {kind}: {line}")
        for line in ledger.odd[:10]:
            print(f"  odd: {line}")
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        for m in machines:
            m.kill_relay()
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if args.keep:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
