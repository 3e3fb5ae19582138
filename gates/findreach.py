"""Whether an action of `find` (`-delete`, `-exec`) can run on a file git keeps inside the
work tree's `.git` (or the store's `.beads/.git`): find's expression read as find reads it
and tried on sample paths of such a repository.

find descends into every folder, dot folders included, so a name filter that cannot match
`.git` itself (`-name HEAD`, `-name '*.pack'`) still reaches the files inside it. The
samples are git's own names (HEAD, config, index, packed-refs, pack files, loose objects,
hooks, ...) and a branch's name: refs can be named anything, so a ref is sampled with a
name the filter itself can match when it can match a name made only of ASCII letters,
digits and `-`, as most branch and tag names are (`main`, `fix-42`, `v2`). A filter that
writes a `.`, `_` or `~` (`*.pyc`, `__pycache__`, `*~`) and none of git's names is taken
to stay out: git's files never end in `.pyc`, `.o`, `.log`, `.tmp`, `.orig`, `.bak`, `.swp`.
A branch's name is sampled as a file (a folder under refs/heads holds only branches named
`NAME/...`), so `-type d -name build` stays out. When the refs a repository holds were read
(`ref_files`), they are sampled instead, by their own names alone (their files, their logs'
files and the folders their names make): `-name build` reaches no branch unless one is
named so.

What prevents reaching them is read as find does it: `-maxdepth`, `-mindepth`, a `-prune`
on `.git` (without `-depth` or `-delete`, which turn pruning off), a negated `-path` test,
each with find's operators (`!`, `-a`, `-o`, `,`, parentheses); a test the sample cannot
decide (`-mtime`, `-size`, `-regex`, ...) can go either way. An expression it cannot read
(an unknown primary, a word held in a variable where a primary goes) is taken to reach
them. The store's own files (`STORE_PATHS`, the view's folders) and Claude Code's settings
(`CLAUDE_PATHS`) are sampled as git's are (`guarded_samples`).

The same reading says which name filters a match can pass (`matched_names`: a filter on
a pruned branch, `-name .git -prune -o ...`, is none of them), trying a sample that
stands for any path of its depth. The expression itself is read and evaluated by
`gates.findexpr`.
"""

from __future__ import annotations

import os

from gates.findexpr import (
    NAME_TESTS,
    PATH_TESTS,
    PROBES,
    REF,
    Sample,
    Unread,
    depth_limit,
    outcomes,
    parse,
    ref_name,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

FILE, FOLDER = frozenset("f"), frozenset("d")
_OBJECT = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
_PACK = "objects/pack/pack-" + _OBJECT
# Paths inside a git repository's folder (`.git`, the store's bare `.beads/.git`), with
# their kind; "" is the folder itself. The most telling first: a verdict names the first.
GIT_PATHS: tuple[tuple[str, frozenset[str]], ...] = (
    ("HEAD", FILE),
    ("config", FILE),
    ("index", FILE),
    ("packed-refs", FILE),
    ("description", FILE),
    ("ORIG_HEAD", FILE),
    ("FETCH_HEAD", FILE),
    ("MERGE_HEAD", FILE),
    ("COMMIT_EDITMSG", FILE),
    ("shallow", FILE),
    ("index.lock", FILE),  # a running git's: removed under it, its index is lost
    *((f"{_PACK}.{suffix}", FILE) for suffix in ("pack", "idx", "rev", "bitmap", "keep")),
    *((f"{_PACK}.{suffix}", FILE) for suffix in ("promisor", "mtimes")),
    (f"objects/{_OBJECT[:2]}/{_OBJECT[2:]}", FILE),
    ("objects/pack/multi-pack-index", FILE),
    ("objects/info/packs", FILE),
    ("objects/info/alternates", FILE),
    ("objects/info/commit-graph", FILE),
    ("objects/info/commit-graphs/commit-graph-chain", FILE),
    (f"objects/info/commit-graphs/graph-{_OBJECT}.graph", FILE),
    ("refs/remotes/origin/HEAD", FILE),
    ("logs/HEAD", FILE),
    *(
        (f"hooks/{hook}", FILE)
        for hook in (
            "pre-commit",
            "commit-msg",
            "prepare-commit-msg",
            "post-commit",
            "pre-push",
            "post-checkout",
            "post-merge",
            "pre-rebase",
            "post-rewrite",
            "pre-receive",
            "update",
            "post-receive",
            "post-update",
            "reference-transaction",
            "fsmonitor-watchman",
            "pre-merge-commit",
            "push-to-checkout",
        )
    ),  # fmt: skip
    ("info/exclude", FILE),
    ("info/attributes", FILE),
    ("info/refs", FILE),
    ("info/sparse-checkout", FILE),
    ("info/grafts", FILE),
    ("", FOLDER),
    *((folder, FOLDER) for folder in ("objects", "objects/pack", "objects/info", "refs")),
    *((folder, FOLDER) for folder in ("refs/heads", "refs/tags", "refs/remotes", "logs")),
    *((folder, FOLDER) for folder in ("hooks", "info", "worktrees", "modules", "branches")),
    (f"objects/{_OBJECT[:2]}", FOLDER),
)
# The store's own files in its folder (`.beads`) beside its repository: its settings and
# the runtime's databases, locks and scratch folder; "" is the folder itself.
STORE_PATHS: tuple[tuple[str, frozenset[str]], ...] = (
    ("config.yaml", FILE),
    ("", FOLDER),
    (".runtime", FOLDER),
    *((f".runtime/{name}", FILE) for name in ("index.sqlite3", "events.sqlite3", "view-applied")),
    *((f".runtime/{name}", FILE) for name in ("index.sqlite3-wal", "locks/write.lock")),
    (".runtime/locks", FOLDER),
    (".runtime/tmp", FOLDER),
)
VIEW_BEAD = "gc-7k2qabcd.yaml"  # a bead's file in the view, as `beads.records.ids` names it
VIEW_LIMIT = 64  # the view's folders sampled at most
# Claude Code's settings in `.claude`, where the gates are hooked.
CLAUDE_PATHS: tuple[tuple[str, frozenset[str]], ...] = (
    ("settings.json", FILE),
    ("settings.local.json", FILE),
    ("", FOLDER),
)
# Where a branch's name is a file (`REF`: any name made of `REF_CHARS`).
REF_PATHS = (f"refs/heads/{REF}", f"refs/tags/{REF}", f"logs/refs/heads/{REF}")
REF_LIMIT = 4000  # refs read from a repository at most: more, and a branch may be named anything
NAMES_LIMIT = 32  # name tests each tried alone at most (`matched_names`): more, any name


def guarded_samples(
    base: str,
    repos: list[str],
    refs: dict[str, list[str]] | None = None,
    store: str | None = None,
    claude: str | None = None,
) -> list[tuple[str, frozenset[str]]]:
    """Sample paths, relative to the search root `base` (an absolute folder), of what the
    gate guards under it, the most telling first: git's files in each repository at `repos`
    (relative folders: `.git`, `.beads/.git`, `../project/.git`), the store's own files at
    `store` (`.beads`: `STORE_PATHS`, and the view's folders it holds, `view_samples`) and
    Claude Code's settings at `claude` (`.claude`), each when it is a folder. `refs` gives,
    for a repository whose refs were read (`ref_files`), the refs it holds
    (`refs/heads/main`): its branches are sampled by those names alone, else by any name a
    filter can match."""
    samples: list[tuple[str, frozenset[str]]] = []
    for top in repos:
        known = (refs or {}).get(top)
        inner = [*GIT_PATHS, *((ref, FILE) for ref in REF_PATHS)] if known is None else [
            *GIT_PATHS, *_ref_samples(known)
        ]  # fmt: skip
        samples += [(f"{top}/{path}" if path else top, kind) for path, kind in inner]
    for top, inner in (
        (store, [*STORE_PATHS, *view_samples(os.path.join(base, store or ""))]),
        (claude, CLAUDE_PATHS),
    ):
        if top is not None and os.path.isdir(os.path.join(base, top)):
            samples += [(f"{top}/{path}" if path else top, kind) for path, kind in inner]
    return samples


def view_samples(store_dir: str) -> list[tuple[str, frozenset[str]]]:
    """The store's view (`beads.view`: `<type>s/<aa>/<bb>/<id>.yaml`) as samples: each
    folder the store's folder holds besides `.git` and `.runtime` (`VIEW_LIMIT` at most),
    its shard folders and a bead's file in them."""
    found: list[tuple[str, frozenset[str]]] = []
    try:
        with os.scandir(store_dir) as entries:
            for entry in entries:
                if len(found) >= 4 * VIEW_LIMIT:
                    break
                if entry.name not in (".git", ".runtime") and entry.is_dir(follow_symlinks=False):
                    shard = f"{entry.name}/{_OBJECT[:2]}"
                    found += [(entry.name, FOLDER), (shard, FOLDER),
                              (f"{shard}/{_OBJECT[2:4]}", FOLDER),
                              (f"{shard}/{_OBJECT[2:4]}/{VIEW_BEAD}", FILE)]  # fmt: skip
    except OSError:
        pass
    return found


def reaches_git(
    tests: list[str | None],
    action: int,
    root_text: str,
    samples: list[tuple[str, frozenset[str]]],
    tick: Callable[[], None] = lambda: None,
) -> list[str]:
    """The `samples` (`guarded_samples`) find's action at `tests[action]` can run on, the
    most telling first; when the expression cannot be read, the first. `root_text` is the
    search root as find names it; `tick` is called once a sample (the judge's clock: a long
    expression costs per sample)."""
    found = reaches(tests, action, root_text, samples, tick)
    return [samples[0][0]] if found is None and samples else found or []


def reaches(
    tests: list[str | None],
    action: int,
    root_text: str,
    samples: list[tuple[str, frozenset[str]]],
    tick: Callable[[], None] = lambda: None,
    wide: bool = False,
    focus: int | None = None,
) -> list[str] | None:
    """Which of `samples` (paths relative to the search root, with their kind) find's
    action at `tests[action]` can run on, in their order; None when the expression cannot
    be read. `wide`: each sample stands for any path of its depth (its path tests, `-path`,
    `-ipath`, ..., can go either way), and its name for any name that passes the name test
    at `tests[focus]` (`-name`, `-iname`; the others can go either way), or none (`focus`
    -1)."""
    try:
        node = parse(tests)
    except Unread:
        return None
    depth_first = any(w in ("-depth", "-d", "-delete") for w in tests)
    max_depth = depth_limit(tests, "-maxdepth", max, 1 << 30)
    min_depth = depth_limit(tests, "-mindepth", min, 0)
    refs = _ref_names(tests)  # the names a branch is sampled with, the first one shown
    pruned: dict[str, bool] = {}

    def surely_pruned(relative: str) -> bool:  # a folder find does not go into
        if relative not in pruned:
            given = outcomes(node, Sample(root_text, relative, FOLDER, refs, wide), -1)
            pruned[relative] = all(prune for _r, _f, prune in given)
        return pruned[relative]

    found = []
    for relative, kind in samples:
        tick()
        parts = relative.split("/") if relative else []  # "": the root, at depth 0
        if not min_depth <= len(parts) <= max_depth:
            continue
        if not depth_first and any(
            surely_pruned("/".join(parts[:k])) for k in range(min_depth, len(parts))
        ):
            continue
        sample = Sample(root_text, relative, kind, refs, wide, focus)
        if any(fired for _r, fired, _p in outcomes(node, sample, action)):
            found.append(relative.replace(REF, refs[0]))
    return found


def matched_names(
    tests: list[str | None],
    action: int,
    root_text: str,
    tick: Callable[[], None] = lambda: None,
) -> list[str] | None:
    """The globs of the name tests (`-name`, `-iname`: folded to lower case) one of which
    a path find's action at `tests[action]` can run on passes, as find reads its expression:
    a test is left out when the action cannot run on a path passing it (`-name .git -prune
    -o -name config -exec ...`). None when it can run on a path passing none of them, or the
    expression cannot be read."""
    either = FILE | FOLDER
    samples = [(PROBES[0], either), (f"{PROBES[0]}/{PROBES[0]}", either)]
    tested = [k for k in range(len(tests) - 1) if tests[k] in NAME_TESTS]
    if (
        len(tested) > NAMES_LIMIT
        or reaches(tests, action, root_text, samples, tick, wide=True, focus=-1) != []
    ):
        return None
    names = []
    for k in tested:
        glob = tests[k + 1]
        if glob is not None:
            if reaches(tests, action, root_text, samples, tick, wide=True, focus=k):
                names.append(glob.lower() if tests[k] == "-iname" else glob)
    return names


def _ref_samples(known: list[str]) -> list[tuple[str, frozenset[str]]]:
    """Samples for the refs a repository holds (`refs/heads/fix/42`): each ref's file, its
    log's file, and the folders a ref's name makes (`refs/heads/fix`, `logs/refs/heads/fix`)."""
    files: dict[str, frozenset[str]] = {}
    folders: dict[str, frozenset[str]] = {}
    for ref in known:
        for path in (ref, f"logs/{ref}"):
            files[path] = FILE
            parts = path.split("/")
            for k in range(2 if path.startswith("refs/") else 3, len(parts)):
                folders["/".join(parts[:k])] = FOLDER
    return [*files.items(), *folders.items()]


def ref_files(git_dir: str, limit: int | None = None) -> list[str] | None:
    """The refs the repository at `git_dir` holds (`refs/heads/main`): the files under its
    refs/ folder and the names in its packed-refs (a packed branch gets a file again when it
    moves). None when `git_dir` is not a folder or it holds more than `limit` refs
    (`REF_LIMIT`), or they cannot be read: its branches may then have any name."""
    if not os.path.isdir(git_dir) or os.path.islink(git_dir):
        return None
    limit = REF_LIMIT if limit is None else limit
    found: set[str] = set()
    seen = 0  # entries read: folders count too, so a deep or wide tree ends the reading
    try:
        folders = ["refs"]
        while folders:
            folder = folders.pop()
            with os.scandir(os.path.join(git_dir, folder)) as entries:
                for entry in entries:
                    seen += 1
                    if seen > limit:
                        return None
                    name = f"{folder}/{entry.name}"
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(name)
                    else:
                        found.add(name)
        packed = os.path.join(git_dir, "packed-refs")
        if os.path.exists(packed):
            with open(packed, encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    seen += 1
                    if seen > 2 * limit:  # a peeled tag's `^` line follows its ref
                        return None
                    ref = line.rstrip("\n").partition(" ")[2]
                    if not line.startswith(("#", "^")) and ref.startswith("refs/"):
                        found.add(ref)
    except OSError:
        return None
    if len(found) > limit:
        return None
    return sorted(found)


def _ref_names(tests: list[str | None]) -> list[str]:
    """Branch names the name and path tests can match (each test's own, when it can match
    a name made of a ref's usual characters), and `main`: the first is shown."""
    names = []
    for k in range(len(tests) - 1):
        if tests[k] in NAME_TESTS or tests[k] in PATH_TESTS:
            given = tests[k + 1]
            if given is not None:
                folded = given.lower() if tests[k].startswith("-i") else given
                name = ref_name(folded.rsplit("/", 1)[-1])
                if name is not None and name not in names:
                    names.append(name)
    return [*names, "main"]
