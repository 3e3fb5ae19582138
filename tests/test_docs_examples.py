"""The documentation's examples run as written: every `gc` and `inbox` line of a fenced shell
block of README.md and docs/*.md, and every Python block.

A page's lines run in order, never through a shell, in a temporary directory of the page's own:
a `gc` or `inbox` line through that program's entry point as the `gc` fixture runs it (its own
argv, environment, cwd and streams; a process of its own where a setting needs one). The first
command there finds a fresh store (a copy of one `gc init` made) unless the page makes one
itself. Placeholders of the docs are filled first (`PLACEHOLDERS`): paths under `/tmp/` go to
the temporary directory, the remote of the README's tour is a real `git daemon`, NATS URLs a
real `nats-server`, `gc-XXXX` the id the page's last command printed. A line fails the test
when it exits 2 (usage), 50 (internal error) or shows a traceback, or when it exits other than
0 or the `# exit N` its comment names; in a `console` block, the lines after a `$ ` command are
output it must print. A line another test runs once a test run with the same argv, where the
page's state changes nothing (`SHARED_RUNS`), is judged by that run's result.

A block preceded by `<!-- not run: REASON -->`, or a line ending in `# not run: REASON`, is
skipped and listed by `test_every_example_not_run_says_why`. A line that mentions `gc` or
`inbox` in a way this test cannot run (command substitution, a variable) fails until it is
rewritten or marked. How to write examples: docs/development.md.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.conftest import GcRunner, copy_store, gc_program
from tests.test_mail_conformance import STRICT_RUN_ARGS, strict_run_of_the_example
from tests.test_nats import NatsServer
from tests.test_sync import daemon  # noqa: F401 - a fixture

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_LANGUAGES = ("", "sh", "bash", "shell", "console")
PROGRAMS = ("gc", "inbox")
MARKER = re.compile(r"<!--\s*not run:(.*?)-->")
LINE_MARKER = re.compile(r"#.*\bnot run:(.*?)\)?\s*$")
EXIT_COMMENT = re.compile(r"#\s*exit (\d+)\b")
# Ids the docs write as placeholders: the id (or thread id) the page's last command printed.
ID_PLACEHOLDER = re.compile(r"\bgc-X{4,}\b")
PRINTED_ID = re.compile(r"\b[a-z][a-z0-9]*-[0-9a-z]{4,}\b")
OPERATORS = ("&&", "||", ";", "(", ")", "|", ">", ">>", "<", "&")
# `gc` lines (their argv after the placeholders are filled) run once a test run for another
# test too: the exec protocol page's `gc mail conformance --strict` of its example provider
# (the suite sends to recipients of its own, so the page's state changes nothing), checked
# case by case in tests/test_mail_conformance.py.
SHARED_RUNS = {STRICT_RUN_ARGS: strict_run_of_the_example}


class Block(NamedTuple):
    """One fenced block: where it starts, its language, its lines, why it is not run."""

    page: Path
    line: int
    language: str
    lines: list[str]
    not_run: str | None


class Command(NamedTuple):
    """One shell line of a block that runs `gc` or `inbox`, and what the docs show of it."""

    where: str
    text: str
    output: list[str]
    not_run: str | None


def blocks(page: Path) -> Iterator[Block]:
    """The fenced blocks of `page`, with the `not run` marker on the line before each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    at = 0
    while at < len(lines):
        fence = re.match(r"^(\s*)(`{3,})\s*(\w*)\s*$", lines[at])
        if not fence:
            at += 1
            continue
        end = at + 1
        while end < len(lines) and lines[end].strip() != fence.group(2):
            end += 1
        before = next((line for line in reversed(lines[:at]) if line.strip()), "")
        marked = MARKER.search(before)
        reason = marked.group(1).strip() if marked else None
        yield Block(page, at + 1, fence.group(3), lines[at + 1 : end], reason)
        at = end + 1


def commands(block: Block) -> Iterator[Command]:
    """The shell lines of `block` (continuations joined) that mention `gc` or `inbox`."""
    if block.language not in SHELL_LANGUAGES:
        return
    console = any(line.startswith("$ ") for line in block.lines)
    found: list[Command] = []
    joined = ""
    for number, line in enumerate(block.lines, start=block.line + 1):
        where = f"{block.page.name}:{number}"
        if console and not line.startswith("$ ") and not joined:
            if found:
                found[-1].output.append(line)
            continue
        if not console and line[:1].isspace() and not joined:
            continue  # an option list's continuation, not a command
        text = joined + line.removeprefix("$ ")
        if text.endswith("\\"):
            joined = text[:-1] + " "
            continue
        joined = ""
        if not runs_ours(text):
            continue
        marked = LINE_MARKER.search(text)
        reason = block.not_run or (marked.group(1).strip() if marked else None)
        found.append(Command(where, text, [], reason))
    yield from found


def runs_ours(text: str) -> bool:
    """Whether a shell line runs `gc` or `inbox` (a comment or prose naming them does not)."""
    code, _comment = split_comment(text)
    if re.search(r"(\$\(|`)\s*([A-Za-z_]\w*=\S*\s+)*(gc|inbox)\b", code):
        return True  # inside a command substitution: found, and refused as unrunnable
    try:
        return any(words[0] in PROGRAMS for words in programs(code))
    except ValueError:
        return False  # not shell (unbalanced quotes): prose or output


def programs(text: str) -> list[list[str]]:
    """The simple commands of a line, their environment assignments left out."""
    runs = []
    for words in segments(text):
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words = words[1:]
        if words:
            runs.append(words)
    return runs


# -- running a page -------------------------------------------------------------------------


def split_comment(text: str) -> tuple[str, str]:
    """A shell line's code and the comment ending it (after a `#` outside quotes)."""
    for match in re.finditer(r"(?:^|\s)#", text):
        try:
            shlex.split(text[: match.start()])
        except ValueError:
            continue  # the `#` is inside quotes
        return text[: match.start()].rstrip(), text[match.end() :].strip()
    return text, ""


def segments(text: str) -> list[list[str]]:
    """The simple commands of a shell line, in order (`&&`, `;`, subshells, pipes split it);
    redirections are dropped. A part after a pipe is another program's: left out."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    found: list[list[str]] = []
    current: list[str] = []
    piped = False
    at = 0
    while at < len(tokens):
        token = tokens[at]
        if token in (">", ">>", "<", ">&"):
            if current and current[-1].isdigit():
                current.pop()  # `2>`
            at += 2
            continue
        if token in OPERATORS or set(token) <= set("&|;()<>"):
            if current and not piped:
                found.append(current)
            piped = token == "|"
            current = []
        elif not piped:
            current.append(token)
        at += 1
    if current and not piped:
        found.append(current)
    return found


ALL_COMMANDS = [c for page in PAGES for block in blocks(page) for c in commands(block)]


class PageRun:
    """The state of one page's run: its directories, placeholders and the ids printed."""

    def __init__(
        self,
        tmp: Path,
        placeholders: dict[str, str],
        tmp_path_factory: pytest.TempPathFactory,
        fresh_store: Path,
    ) -> None:
        self.tmp = tmp
        self.fresh_store = fresh_store  # a store as `gc init` makes it, copied where one is due
        self.tmp_path_factory = tmp_path_factory  # for the runs of `SHARED_RUNS`
        self.work = tmp / "work"
        self.work.mkdir()
        self.placeholders = placeholders
        self.ids: list[str] = []
        self.threads: list[str] = []
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
        self.env["PATH"] = f"{Path(gc_program()).parent}{os.pathsep}{self.env.get('PATH', '')}"

    def fill(self, text: str) -> str:
        # One pass, longest first: a value filled in (a checkout under /tmp) is never filled
        # again.
        if self.placeholders:
            keys = sorted(self.placeholders, key=len, reverse=True)
            found = re.compile("|".join(map(re.escape, keys)))
            text = found.sub(lambda match: self.placeholders[match.group(0)], text)

        def printed(match: re.Match[str]) -> str:
            pool = self.threads if len(match.group(0)) > 7 and self.threads else self.ids
            assert pool, f"{match.group(0)}: no command of the page printed an id before it"
            return pool[-1]

        return ID_PLACEHOLDER.sub(printed, text)

    def run(self, command: Command) -> None:
        text, comment = split_comment(self.fill(command.text))
        expected = EXIT_COMMENT.search("# " + comment) if comment else None
        cwd = self.work
        for words in segments(text):
            env = dict(self.env)
            while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
                name, _eq, value = words.pop(0).partition("=")
                env[name] = value
            if not words:
                continue
            if words[0] == "cd":
                cwd = cwd / words[1]
                continue
            if words[0] == "mkdir":
                for name in words[1:]:
                    if not name.startswith("-"):
                        (cwd / name).mkdir(parents=True, exist_ok=True)
                continue
            if words[0] not in PROGRAMS:
                continue  # another program's line (git, pip, python): not ours to run
            self._run(command, words, env, cwd, int(expected.group(1)) if expected else 0)

    def _run(
        self, command: Command, words: list[str], env: dict[str, str], cwd: Path, code: int
    ) -> None:
        if cwd == self.work and not (self.work / ".beads").exists() and words[1:2] != ["init"]:
            copy_store(self.fresh_store, cwd / ".beads")
        shared = SHARED_RUNS.get(tuple(words[1:])) if words[0] == "gc" else None
        if shared and env == self.env:
            result = shared(self.tmp_path_factory)
        else:
            # The program's own entry point, with the line's argv, environment, cwd and
            # streams (tests/conftest.py: a process of its own where a setting needs one).
            runner = GcRunner(cwd, program=words[0])
            result = runner(*words[1:], env=env, internal_error=True)
        said = f"{command.where}: {shlex.join(words)}\n{result.stdout}{result.stderr}"
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr, said
        assert result.returncode not in (2, 50), said
        assert result.returncode == code, said
        for line in command.output:
            wanted = re.escape(line.strip()).replace("\\.\\.\\.", ".*")
            wanted = re.sub(r"gc\\-X+", "[a-z][a-z0-9]*-[0-9a-z]+", wanted)
            assert re.search(wanted, result.stdout + result.stderr), f"{said}\nwanted: {line}"
        self._remember(result.stdout)

    def _remember(self, stdout: str) -> None:
        """Keep the ids a command printed, for the `gc-XXXX` placeholders after it."""
        try:
            data = json.loads(stdout)
        except ValueError:
            self.ids += PRINTED_ID.findall(stdout)[:1]
            return
        found = re.findall(r'"(thread_id|id)": "([^"]+)"', json.dumps(data))
        self.threads += [value for key, value in found if key == "thread_id"][:1]
        self.ids += [value for key, value in found if key == "id"][:1]


# -- the tests ------------------------------------------------------------------------------


@pytest.fixture
def nats_url(tmp_path: Path) -> Iterator[str]:
    server = NatsServer(tmp_path / "jetstream")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def page_placeholders(
    tmp: Path, work: Path, remote: str | None, nats: str | None
) -> dict[str, str]:
    """What the docs write for things a reader has and a test makes, longest first."""
    return {
        "/tmp/gc-demo": str(work),
        "/tmp/gc-remote.git": remote or "git://127.0.0.1:1/shared.git",
        "$PWD/docs/": f"{ROOT}/docs/",
        " docs/examples/": f" {ROOT}/docs/examples/",
        "nats://HOST:4222": nats or "nats://127.0.0.1:1",
        "/tmp/": f"{tmp}/",
    }


RUN_PAGES = sorted({c.where.split(":")[0] for c in ALL_COMMANDS if c.not_run is None})
NEEDS_NATS = {"nats.md", "machines.md"}
# The pages whose commands use the remote: a real `git daemon` serves it for them only.
NEEDS_REMOTE = {c.where.split(":")[0] for c in ALL_COMMANDS if "/tmp/gc-remote.git" in c.text}


# exec-protocol.md's example provider is a program started for every mail operation: seconds.
SLOW_PAGES = {"exec-protocol.md"}


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, marks=pytest.mark.slow) if page in SLOW_PAGES else page
        for page in RUN_PAGES
    ],
)
def test_the_shell_examples_of_a_page_run_in_order(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
    gc_init_template: Path,
    page: str,
) -> None:
    served = request.getfixturevalue("daemon") if page in NEEDS_REMOTE else None
    remote = f"{served}/shared.git" if served else None
    nats = request.getfixturevalue("nats_url") if page in NEEDS_NATS else None
    run = PageRun(tmp_path, {}, tmp_path_factory, gc_init_template)
    run.placeholders = page_placeholders(tmp_path, run.work, remote, nats)
    for command in ALL_COMMANDS:
        if command.where.split(":")[0] == page and command.not_run is None:
            run.run(command)


def test_every_gc_line_the_test_cannot_run_is_marked() -> None:
    unrunnable = []
    for command in ALL_COMMANDS:
        if command.not_run is not None:
            continue
        text, _comment = split_comment(command.text)
        variables = re.search(r"\$[A-Za-z_{]", text.replace("$PWD/docs/", ""))
        if "$(" in text or "`" in text or variables:
            unrunnable.append(f"{command.where}: {command.text}")
        elif not any(words[0] in PROGRAMS for words in programs(text)):
            unrunnable.append(f"{command.where}: {command.text}")
    assert not unrunnable, "rewrite these or mark them `not run`:\n" + "\n".join(unrunnable)


def test_every_example_not_run_says_why() -> None:
    marked = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if line.startswith("    "):
                continue  # an indented code block: an example of a marker, not one
            for match in MARKER.finditer(line):
                marked.append((f"{page.name}:{number}", match.group(1).strip()))
                after = next((text for text in lines[number:] if text.strip()), "")
                assert after.lstrip().startswith("```"), f"{page.name}:{number}: no block after"
    for command in ALL_COMMANDS:
        found = LINE_MARKER.search(command.text)
        if found:
            marked.append((command.where, found.group(1).strip()))
    print("\n".join(f"{where}: not run: {why}" for where, why in marked))
    assert all(why for _where, why in marked), [where for where, why in marked if not why]


# -- the links between the pages ------------------------------------------------------------

LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")


def headings(page: Path) -> set[str]:
    """The anchors GitHub gives `page`'s headings: lower case, punctuation dropped, spaces
    as hyphens, a repeated heading numbered (`-1`, `-2`)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"#{1,6} (.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def test_every_link_between_the_pages_finds_its_page_and_heading() -> None:
    # Read on GitHub, a link is relative to its own page: `docs/x.md` from a page of docs/
    # is a 404 a newcomer meets.
    broken = []
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for target, anchor in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue  # a URL of another site
                linked = (page.parent / target).resolve() if target else page
                if not linked.exists():
                    broken.append(f"{page.name}:{number}: {target} does not exist")
                elif anchor and linked.suffix == ".md" and anchor not in headings(linked):
                    broken.append(f"{page.name}:{number}: {target}#{anchor} has no such heading")
    assert not broken, "\n".join(broken)


# -- the Python examples --------------------------------------------------------------------

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
def test_a_python_example_of_the_docs_runs(
    tmp_path: Path, store_template: Path, page: Path, block: str
) -> None:
    copy_store(store_template, tmp_path / ".beads")  # a copy of an init
    result = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, f"{page.name}:\n{block}\n{result.stderr}"
