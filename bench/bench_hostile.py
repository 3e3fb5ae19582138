#!/usr/bin/env python
"""Hostile remotes against the gate for incoming trees (`beads/sync/treegate.py`): the figure of
the trust issue.

Run from the project root (needs the `git` program):

    python bench/bench_hostile.py [--keep DIR] [--only NAME]

A template is made once: a project's git work tree `m` holding a store with one bead,
synced to a bare remote. For each case the template is copied, a hostile commit is written
into the copy's remote with git plumbing (`hash-object --literally`, `commit-tree`,
`update-ref`: git's own checks skipped, as a hostile machine can skip them), and then:
  - `gc clone` of that remote into a new folder: refused (exit 30; `EXPECTED_EXIT` names
    the cases refused otherwise) and nothing made there;
  - `gc sync` in `m`: refused (the same exit) and the branch unchanged;
  - the store still usable: `gc bead create`, `gc mail send`, `gc bead list` and
    `gc doctor` all exit 0;
  - no file written, changed or removed outside a `.beads/` (the case's folder holds the
    project, its `.git/config`, a victim file and the targets of absolute names).
It prints a line per case and the summary "N/N refused, store usable N/N, outside writes W".

Cases are rows of `CASES` (a name and a function returning the root entries of the hostile
tree, given the template's own); add one by adding a row. Exits 0 when every case passes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GC = str(Path(sys.executable).parent / "gc")
Entry = tuple[str, bytes, str]  # mode, name, object id


@dataclass
class Ctx:
    """What a case builds with: the remote, the template's root entries, and a folder
    outside every store for absolute names and victims."""

    repo: Path
    root: list[Entry]
    outside: Path

    def git(self, *args: str, data: bytes | None = None) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x",
               "GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@x"}  # fmt: skip
        done = subprocess.run(["git", "-C", str(self.repo), *args], input=data,
                              capture_output=True, check=True, env=env)  # fmt: skip
        return done.stdout.decode().strip()

    def blob(self, data: bytes = b"[core]\n\tfsmonitor = touch pwned\n") -> str:
        return self.git("hash-object", "-w", "--stdin", data=data)

    def tree(self, entries: list[Entry]) -> str:
        ordered = sorted(entries, key=lambda e: e[1] + (b"/" if e[0] == "40000" else b""))
        data = b"".join(m.encode() + b" " + n + b"\0" + bytes.fromhex(s) for m, n, s in ordered)
        return self.git("hash-object", "-t", "tree", "--literally", "-w", "--stdin", data=data)

    def chain(self, parts: list[bytes], leaf: tuple[str, str]) -> Entry:
        """The root entry of trees `parts[0]/.../parts[-1]`, the last one `leaf`."""
        mode, sha = leaf
        for name in reversed(parts[1:]):
            sha, mode = self.tree([(mode, name, sha)]), "40000"
        return (mode, parts[0], sha)

    def bead_path(self) -> list[bytes]:
        """The path of the template's bead, as parts."""
        listed = self.git("ls-tree", "-r", "--name-only", "main").split("\n")
        return [p.encode() for p in next(x for x in listed if x != "config.yaml").split("/")]

    def at_bead(self, mode: str, sha: str, name: bytes | None = None) -> list[Entry]:
        """The root with the bead's shard holding one more entry `name` (default: the bead's
        own name, replaced)."""
        typedir, aa, bb, own = self.bead_path()
        sub = self.git("rev-parse", f"main:{typedir.decode()}/{aa.decode()}/{bb.decode()}")
        leaf = [e for e in entries_of(self, sub) if e[1] != (name or own)]
        leaf.append((mode, name or own, sha))
        shard = self.tree(leaf)
        return self.root_with(self.chain([typedir, aa, bb], ("40000", shard)))

    def root_with(self, *entries: Entry, drop: bytes | None = None) -> list[Entry]:
        names = {e[1] for e in entries} | ({drop} if drop else set())
        return [e for e in self.root if e[1] not in names] + list(entries)


def entries_of(ctx: Ctx, tree: str) -> list[Entry]:
    out = []
    for line in filter(None, ctx.git("ls-tree", "-z", tree).split("\0")):
        info, name = line.split("\t", 1)
        mode, _kind, sha = info.split()
        out.append((mode.lstrip("0"), name.encode(), sha))
    return out


def _nfc_nfd(c: Ctx) -> list[Entry]:
    nfc = unicodedata.normalize("NFC", "caf\u00e9s").encode()
    nfd = unicodedata.normalize("NFD", "caf\u00e9s").encode()
    sub = c.tree([("100644", b"x.yaml", c.blob(b"a: 1\n"))])
    return c.root_with(("40000", nfc, sub), ("40000", nfd, sub))


def _hidden_in_range(c: Ctx) -> list[Entry]:
    # A bad commit, then one that removes its entry again: the tip alone looks clean.
    bad = c.tree(c.root_with(("160000", b"vendor", "1" * 40)))
    parent = c.git("rev-parse", "main")
    c.git("update-ref", "refs/heads/main", c.git("commit-tree", bad, "-p", parent, "-m", "bad"))
    return c.root


# Each case: its name, and the root entries of the hostile commit's tree.
CASES: list[tuple[str, Callable[[Ctx], list[Entry]]]] = [
    ("name ../.git/config", lambda c: c.root_with(("100644", b"../.git/config", c.blob()))),
    (
        "parts .. / .git / config",
        lambda c: c.root_with(c.chain([b"..", b".git", b"config"], ("100644", c.blob()))),
    ),
    (
        "part . holding config.yaml",
        lambda c: c.root_with(c.chain([b".", b"config.yaml"], ("100644", c.blob()))),
    ),
    (
        "path tasks/aa/bb/../../x",
        lambda c: c.root_with(
            c.chain([b"tasks", b"aa", b"bb", b"..", b"..", b"x"], ("100644", c.blob()))
        ),
    ),
    (
        "name ../../../outside/victim",
        lambda c: c.root_with(("100644", b"../../../outside/victim.txt", c.blob())),
    ),
    (
        "absolute name",
        lambda c: c.root_with(("100644", str(c.outside / "abs.txt").encode(), c.blob())),
    ),
    ("gitlink at the root", lambda c: c.root_with(("160000", b"vendor", "1" * 40))),
    ("gitlink at a bead's path", lambda c: c.at_bead("160000", "2" * 40)),
    (
        "symlink at the root",
        lambda c: c.root_with(("120000", b"notes", c.blob(str(c.outside).encode()))),
    ),
    (
        "symlink as a type directory",
        lambda c: c.root_with(("120000", b"tasks", c.blob(str(c.outside).encode())), drop=b"tasks"),
    ),
    ("symlink at a bead's path", lambda c: c.at_bead("120000", c.blob(b"/etc/passwd"))),
    (
        "symlink as config.yaml",
        lambda c: c.root_with(
            ("120000", b"config.yaml", c.blob(str(c.outside / "victim.txt").encode()))
        ),
    ),
    (
        ".git directory at the root",
        lambda c: c.root_with(c.chain([b".git", b"config"], ("100644", c.blob()))),
    ),
    (".GIT directory", lambda c: c.root_with(c.chain([b".GIT", b"config"], ("100644", c.blob())))),
    (".Git directory", lambda c: c.root_with(c.chain([b".Git", b"config"], ("100644", c.blob())))),
    (
        ".git. (trailing dot)",
        lambda c: c.root_with(c.chain([b".git.", b"config"], ("100644", c.blob()))),
    ),
    (
        "git~1 (short name)",
        lambda c: c.root_with(c.chain([b"GIT~1", b"config"], ("100644", c.blob()))),
    ),
    (
        ".git inside a shard",
        lambda c: c.root_with(c.chain([b"tasks", b"aa", b".git", b"config"], ("100644", c.blob()))),
    ),
    (
        ".runtime directory",
        lambda c: c.root_with(
            c.chain([b".runtime", b"index.sqlite3"], ("100644", c.blob(b"junk")))
        ),
    ),
    ("empty name", lambda c: c.root_with(("100644", b"", c.blob()))),
    ("backslashes", lambda c: c.root_with(("100644", b"..\\..\\x", c.blob()))),
    ("a path in one name", lambda c: c.root_with(("100644", b"tasks/aa/x.yaml", c.blob()))),
    (
        "case collision tasks/Tasks",
        lambda c: c.root_with(("40000", b"Tasks", c.git("rev-parse", "main:tasks"))),
    ),
    ("NFC/NFD collision", _nfc_nfd),
    ("the same name twice", lambda c: c.root + [c.root[0]]),
    (
        "config.yaml as a directory",
        lambda c: c.root_with(c.chain([b"config.yaml", b"x"], ("100644", c.blob()))),
    ),
    (
        "type directory as a file",
        lambda c: c.root_with(("100644", b"tasks", c.blob()), drop=b"tasks"),
    ),
    (
        "bead as a directory (40000)",
        lambda c: c.at_bead("40000", c.tree([("100644", b"x", c.blob())])),
    ),
    ("bead of mode 100755", lambda c: c.at_bead("100755", c.blob(b"id: x\n"))),
    ("bead of mode 100664", lambda c: c.at_bead("100664", c.blob(b"id: x\n"))),
    (
        "tree of mode 040000",
        lambda c: c.root_with(
            ("040000", b"tasks", c.git("rev-parse", "main:tasks")), drop=b"tasks"
        ),
    ),
    (
        "bead at the wrong shard",
        lambda c: c.root_with(
            c.chain(
                [b"tasks", b"00", b"00", b"gc-aaaaaaaa.yaml"],
                ("100644", c.blob(b"id: gc-aaaaaaaa\n")),
            )
        ),
    ),
    ("bead name not an id", lambda c: c.at_bead("100644", c.blob(), b"GC-X.yaml")),
    ("huge name", lambda c: c.root_with(("100644", b"x" * 4000, c.blob()))),
    ("name not UTF-8", lambda c: c.root_with(("100644", b"\xff\xfe.yaml", c.blob()))),
    ("newline in a name", lambda c: c.root_with(("100644", b"a\nb", c.blob()))),
    ("file outside the layout", lambda c: c.root_with(("100644", b"README.md", c.blob()))),
    ("object missing", lambda c: c.root_with(("100644", b"notes.yaml", "3" * 40))),
    ("file entry naming a tree", lambda c: c.at_bead("100644", c.git("rev-parse", "main^{tree}"))),
    ("bad commit hidden by a later one", _hidden_in_range),
]


# Cases refused with another exit code than 30: a remote that cannot send an object its own
# tree names fails the fetch itself (a storage error, 50), before the gate.
EXPECTED_EXIT = {"object missing": 50}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    return subprocess.run([GC, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)  # fmt: skip


def snapshot(top: Path) -> dict[str, bytes]:
    """Every file under `top` outside a `.beads/` and the bare remote (links as links)."""
    found = {}
    for path in sorted(top.rglob("*")):
        rel = path.relative_to(top)
        if ".beads" in rel.parts or rel.parts[0] == "remote.git":
            continue
        if path.is_symlink():
            found[rel.as_posix()] = b"-> " + os.readlink(path).encode()
        elif path.is_file():
            found[rel.as_posix()] = path.read_bytes()
    return found


def make_template(where: Path) -> Path:
    template = where / "template"
    machine = template / "m"
    machine.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(machine)], check=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(template / "remote.git")],
                   check=True)  # fmt: skip
    (template / "outside").mkdir()
    (template / "outside" / "victim.txt").write_text("the victim's file\n")
    for args in (["init"], ["bead", "create", "--type", "task", "--title", "one"],
                 ["remote", "add", "origin", str(template / "remote.git")], ["sync"]):  # fmt: skip
        done = run(*args, cwd=machine)
        assert done.returncode == 0, (args, done.stderr)
    return template


def try_case(template: Path, where: Path, build: Callable[[Ctx], list[Entry]], code: int) -> dict:
    shutil.copytree(template, where, symlinks=True)
    remote, machine = where / "remote.git", where / "m"
    run("remote", "remove", "origin", cwd=machine)
    run("remote", "add", "origin", str(remote), cwd=machine)
    ctx = Ctx(remote, [], where / "outside")
    ctx.root = entries_of(ctx, "main")
    entries = build(ctx)
    parent = ctx.git("rev-parse", "main")
    commit = ctx.git("commit-tree", ctx.tree(entries), "-p", parent, "-m", "hostile")
    ctx.git("update-ref", "refs/heads/main", commit)
    before = snapshot(where)
    ours = (machine / ".beads" / ".git" / "refs" / "heads" / "main").read_text()
    cloned = run("clone", str(remote), str(where / "c"), cwd=where)
    synced = run("sync", cwd=machine)
    after_ref = (machine / ".beads" / ".git" / "refs" / "heads" / "main").read_text()
    usable = all(
        run(*args, cwd=machine).returncode == 0
        for args in (
            ["bead", "create", "--type", "task", "--title", "after"],
            ["mail", "send", "dog", "-m", "hi", "--agent", "mayor"],
            ["bead", "list"],
            ["doctor"],
        )  # fmt: skip
    )
    after = snapshot(where)
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    return {
        "clone": cloned.returncode,
        "sync": synced.returncode,
        "refused": cloned.returncode == code
        and synced.returncode == code
        and after_ref == ours
        and not (where / "c" / ".beads").exists(),
        "usable": usable,
        "outside": sorted(changed),
        "why": synced.stderr.strip().split(": ", 3)[-1][:90],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", help="Build in this folder and keep it.")
    parser.add_argument("--only", help="Run only the cases whose name contains this.")
    args = parser.parse_args()
    top = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gc-hostile-"))
    top.mkdir(parents=True, exist_ok=True)
    cases = [(n, b) for n, b in CASES if not args.only or args.only in n]
    try:
        template = make_template(top)
        refused = usable = outside = 0
        for number, (name, build) in enumerate(cases):
            code = EXPECTED_EXIT.get(name, 30)
            got = try_case(template, top / f"case{number}", build, code)
            refused += got["refused"]
            usable += got["usable"]
            outside += len(got["outside"])
            print(
                f"{name:32} clone {got['clone']:>2} sync {got['sync']:>2} "
                f"refused {'yes' if got['refused'] else 'NO '} "
                f"usable {'yes' if got['usable'] else 'NO '} outside {len(got['outside'])}"
                f"  {got['why']}{' ' + str(got['outside']) if got['outside'] else ''}",
                flush=True,
            )
        total = len(cases)
        print(f"{refused}/{total} refused, store usable {usable}/{total}, outside writes {outside}")
        return 0 if refused == usable == total and outside == 0 else 1
    finally:
        if not args.keep:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
