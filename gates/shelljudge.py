"""The destructive-op gate's reading of a shell command: every command of the syntax tree.

`Judge.script` parses a command line and visits every node of its tree, in every construct
(lists, pipelines, subshells, groups, compound statements, function bodies, substitutions),
reachable or not. Each simple command is reduced to its program and argument words
(`gates.shellwords`), unwrapped (`sudo`, `env`, `timeout`, `xargs`, `ssh HOST`, ...; a
`-c` string, `eval`, a heredoc or here-string fed to a shell are parsed in turn) and handed
to the program's rule (`gates.rules`). The verdict is the strongest any part earns:
0 no decision, 1 ask, 2 deny.

What the judge cannot read is "ask": a tree with an ERROR or MISSING node, a node type it
does not know, nesting past `MAX_DEPTH`, more than `MAX_NODES` nodes, a deadline passed.
"""

from __future__ import annotations

import os
import re
from time import monotonic

from gates import shellwords
from gates.shellpaths import ASK, DENY, NONE
from gates.shellwords import UNKNOWN, literal, value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

MAX_DEPTH = 8  # nested shells, `eval`s and `-c` strings
MAX_NODES = 40_000  # nodes visited over all the parses of one judgement
MAX_WORDS = 4_000  # words of one simple command
AFTER_BODY = object()  # a walk entry: judge this redirected statement's redirections now
# Variables whose value programs run as a command line (git, ssh, editors, pagers, shells).
RUNS_VARIABLES = frozenset(
    (
        "GIT_SSH_COMMAND", "GIT_SSH", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER",
        "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "EDITOR", "VISUAL", "PAGER",
        "BASH_ENV", "ENV", "PROMPT_COMMAND", "LESSOPEN",
    )
)  # fmt: skip
# Node types whose children are simply visited (the grammar's named and anonymous
# structure); a named type outside this set and the handled ones is "ask".
CONTAINERS = frozenset(
    (
        "program",
        "list",
        "pipeline",
        "subshell",
        "compound_statement",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "for_statement",
        "c_style_for_statement",
        "do_group",
        "case_statement",
        "case_item",
        "function_definition",
        "negated_command",
        "test_command",
        "declaration_command",
        "unset_command",
        "variable_assignment",
        "variable_assignments",
        "variable_name",
        "special_variable_name",
        "word",
        "number",
        "string",
        "string_content",
        "raw_string",
        "ansi_c_string",
        "translated_string",
        "concatenation",
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "brace_expression",
        "array",
        "subscript",
        "binary_expression",
        "unary_expression",
        "ternary_expression",
        "postfix_expression",
        "parenthesized_expression",
        "test_operator",
        "regex",
        "extglob_pattern",
        "comment",
        "command_name",
        "file_descriptor",
        "heredoc_start",
        "heredoc_body",
        "heredoc_content",
        "heredoc_end",
        "file_redirect",
        "heredoc_redirect",
        "herestring_redirect",
    )
)


WRITES = frozenset((">", ">>", ">|", "&>", "&>>", "<>", ">&"))


class Stop(Exception):
    """The judgement is over: a limit was reached (the verdict already says so)."""


class Item:
    """One word of a command: its value (with sentinels) and its node (None: made up);
    `text`, for a made-up word, the text a shell reading it as a script gets."""

    __slots__ = ("word", "node", "text")

    def __init__(self, word: str, node: Any = None, text: str | None = None) -> None:
        self.word = word
        self.node = node
        self.text = text

    @property
    def literal(self) -> str | None:
        return literal(self.word)

    def script(self) -> str:
        """The word as the text a shell reading it as a script would get: its value when
        the text fixes it (`"$1"` in a script whose `$1` is known), else the word as
        written (its expansions read again as unknown)."""
        if self.text is not None:
            return self.text
        if self.node is None:
            return self.word
        known = self.literal
        return known if known is not None else script_text(self.node)


# Stages that hand on the lines they read (some of them, in another order): what a pipe
# through them gives `xargs` is still what the stage before printed.
PASS_LINES_ON = frozenset({"sort", "uniq", "tee", "head", "tail"})
FINDERS = frozenset({"find", "fd", "fdfind"})  # programs that print the paths they find


def _passes_lines_on(items: list[Item]) -> bool:
    """Whether a pipeline stage's words are a filter that writes lines it reads (`sort`,
    `head -5`, `tee log`, a `cat` of its input alone)."""
    program = (items[0].literal or "").rsplit("/", 1)[-1]
    return program in PASS_LINES_ON or (program == "cat" and len(items) == 1)


class Stdin:
    """Where a command's standard input comes from: `text` known, else `what` says; for a
    pipe, `source` is the command before it (a syntax node), when there is one."""

    __slots__ = ("text", "what", "source")

    def __init__(self, text: str | None, what: str, source: Any = None) -> None:
        self.text = text
        self.what = what  # "heredoc", "herestring", "pipe", "file"
        self.source = source


class Judge:
    """One judgement of one command line (its limits shared by every nested parse)."""

    def __init__(
        self,
        tree: str,
        cwd: str,
        settings: dict[str, Any],
        deadline: float,
        program_rules: Callable[[Judge, str, list[Item], Stdin | None, int], None],
    ) -> None:
        """`program_rules(judge, program, items, stdin, depth)` judges one program's command
        (`gates.rules.judge`: the rules name this judge, so they come in as an argument)."""
        self.tree = tree
        self.program_rules = program_rules
        self.cwd: str | None = cwd
        self.settings = settings
        self.deadline = deadline
        self.level = NONE
        self.reason = ""
        self.nodes = 0
        self.steps = 0  # commands and redirections judged (see `in_time`)
        self.git_cache: dict[tuple, Any] = {}

    def note(self, level: int, reason: str) -> None:
        if level > self.level:
            self.level, self.reason = level, reason

    def in_time(self) -> None:
        """Stop ("ask") once the deadline has passed: the rules' own work, per command and
        per redirection, counts against the budget as the walk does."""
        self.steps += 1
        # Every 64th step, as the walk checks every 256th node: a short command is never cut
        # off by a busy machine, a long one still stops near the deadline.
        if self.steps & 63 == 0 and monotonic() > self.deadline:
            self.note(ASK, "it is too large to read within the gate's budget")
            raise Stop

    def script(self, source: str, depth: int = 0) -> None:
        """Judge a shell script (a command line, a `-c` string, a heredoc)."""
        if depth > MAX_DEPTH:
            self.note(ASK, f"its commands nest more than {MAX_DEPTH} shells deep")
            return
        self.parsed(source, depth)
        joined = join_continuations(source)
        if joined != source:
            # Bash drops each backslash-newline before it splits words (`r\<newline>m -rf /`
            # is `rm -rf /`); the parser keeps it inside the word. Judged both ways, the
            # stricter answer stands (the join also ignores quotes: it can only add stops).
            self.parsed(joined, depth)

    def parsed(self, source: str, depth: int) -> None:
        """Parse `source` and walk its tree."""
        data = source.encode("utf-8", "surrogatepass")
        tree = shellwords.parse(data, self.deadline)
        if tree is None:
            self.note(ASK, "it is too long to read within the time budget")
            raise Stop
        shellwords.sources.append(data)
        try:
            self.walk(tree.root_node, depth)
        finally:
            shellwords.sources.pop()

    def walk(self, root: Any, depth: int) -> None:
        # Each node with its last three ancestors (asking a node for its parent walks the
        # tree from the root: too slow on a long command).
        stack = [(root, None, None, None, None)]
        while stack:
            node, parent, grand, great, before = stack.pop()
            if parent is AFTER_BODY:
                self.redirects(node, depth)
                continue
            self.nodes += 1
            if self.nodes > MAX_NODES or (self.nodes & 255 == 0 and monotonic() > self.deadline):
                self.note(ASK, "it is too large to read within the gate's budget")
                raise Stop
            kind = node.type
            if kind == "ERROR" or node.is_missing:
                self.note(ASK, "its shell syntax does not parse")
            elif kind == "command":
                self.command(node, (parent, grand, great, before), depth)
            elif kind in ("while_statement", "for_statement"):
                self.loop(node, (parent, grand, great, before), depth)
            elif kind == "redirected_statement":
                # After its body: tree-sitter hangs `cd D && echo x > f`'s redirection on the
                # whole list, and the `cd` moves where `f` lands.
                stack.append((node, AFTER_BODY, None, None, None))
            elif node.is_named and kind not in CONTAINERS:
                self.note(ASK, f"it uses shell syntax the gate does not read ({kind})")
            stack.extend(_children(node, parent, grand))

    # -- commands -------------------------------------------------------------------------

    def command(self, node: Any, ancestors: tuple, depth: int) -> None:
        items = self.items(node)
        if items is None:
            return
        if len(items) > MAX_WORDS + 1:
            self.note(ASK, f"a command of more than {MAX_WORDS} words is more than it reads")
            raise Stop
        for child in node.children:  # `>file cmd`: redirections inside the command
            if child.type in ("file_redirect",):
                self.file_redirect(child)
            elif child.type == "variable_assignment":
                self.assignment(child, depth)
        stdin = self.stdin_of(node, *ancestors)
        self.argv(items, stdin, depth)
        self.found_arguments(items, depth)
        self.output_substitutions(node, items, stdin, depth)

    def found_arguments(self, items: list[Item], depth: int) -> None:
        """`rm $(find . -type f)`, `rm "$(fd -e pack)"`: an argument that is what `find` or
        `fd` prints is judged as `find ... | xargs -I{} CMD ... {} ...` (`source_items`)."""
        for at in range(1, len(items)):
            node = items[at].node
            if node is not None and node.type == "string":
                inner = [c for c in node.children if c.is_named]
                node = inner[0] if len(inner) == 1 else None
            if node is None or node.type != "command_substitution":
                continue
            stdin = Stdin(None, "pipe", node)
            source = self.source_items(stdin)
            if source and (source[0].literal or "").rsplit("/", 1)[-1] in FINDERS:
                run = [*items[:at], Item("{}"), *items[at + 1 :]]
                self.argv([Item("xargs"), Item("-I"), Item("{}"), *run], stdin, depth)

    def output_substitutions(
        self, node: Any, items: list[Item], stdin: Stdin | None, depth: int
    ) -> None:
        """`find ... | tee >(xargs rm)`, `>(xargs rm) find ...`: the command reading an output
        process substitution a command writes to reads what it writes there (what `tee`
        copies: its input), judged as if piped to it (a statement's redirection:
        `redirects`)."""
        written = stdin if _passes_lines_on(items) else Stdin(None, "pipe", node)
        for child in node.children:
            if child.type == "file_redirect" and written is not None:
                given = _stdout_substitution(child)
                if given is not None:
                    self.reads_substitution(given, written, depth)
        if (items[0].literal or "").rsplit("/", 1)[-1] == "tee" and stdin is not None:
            for item in items[1:]:
                if item.node is not None and _output_substitution(item.node):
                    self.reads_substitution(item.node, stdin, depth)

    def reads_substitution(self, given: Any, stdin: Stdin, depth: int) -> None:
        """Judge the command that first reads the output process substitution `given`
        (`>(xargs rm)`, `>(xargs rm | cat)`, `>(while read f; do ...; done)`) on `stdin`."""
        inner = [c for c in given.children if c.is_named and c.type != "comment"]
        node = inner[0] if inner else None
        while node is not None and node.type in ("list", "pipeline", "redirected_statement"):
            if node.type == "redirected_statement":
                redirects = node.children_by_field_name("redirect")
                if any(_redirect_input(r) is not None for r in redirects):
                    return  # `>(xargs rm < list.txt)`: it reads elsewhere
                node = node.child_by_field_name("body")
            else:
                node = next((c for c in node.children if c.is_named), None)
        if node is None:
            return
        if node.type == "while_statement":
            self.loop(node, (None, None, None, None), depth, stdin)
        elif node.type == "command" and (words := self.items(node)) is not None:
            if not any(_redirect_input(c) is not None for c in node.children):
                self.argv(words, stdin, depth)

    def items(self, node: Any) -> list[Item] | None:
        """A command node's words, program first (None: it names no program); past
        `MAX_WORDS`, the first words and one more."""
        name = node.child_by_field_name("name")
        if name is None:
            return None
        items = [Item(value(name.children[0] if name.children else name), _first(name))]
        for argument in node.children_by_field_name("argument"):
            words = shellwords.values(argument)  # `{build,dist}`: brace expansion makes several
            items += [Item(w, argument if len(words) == 1 else None) for w in words]
            if len(items) > MAX_WORDS + 1:
                break
        return items

    def loop(self, node: Any, ancestors: tuple, depth: int, fed: Stdin | None = None) -> None:
        """`find ... | while read f; do CMD "$f"; done` (`done < <(find ...)`), `for f in
        $(find ...); do ...; done`: the body runs on each path find prints, judged as
        `find ... | xargs -I{} sh -c BODY _ {}` with `$f` as `$1` (`source_items`; `fed`: the
        while loop's input, when it is known from elsewhere)."""
        name, stdin = None, None
        if node.type == "while_statement":
            condition = node.child_by_field_name("condition")
            name = _read_name(self.items(condition)) if condition is not None else None
            stdin = (fed or self.stdin_of(node, *ancestors)) if name is not None else None
        else:
            given = node.children_by_field_name("value")
            variable = node.child_by_field_name("variable")
            if len(given) == 1 and given[0].type == "command_substitution" and variable:
                name, stdin = shellwords.text(variable), Stdin(None, "pipe", given[0])
        body = node.child_by_field_name("body")
        if name is None or stdin is None or body is None or body.type != "do_group":
            return
        text = shellwords.text(body)
        if not (text.startswith("do") and text.endswith("done")):
            return
        used = re.compile(r"\$(?:\{" + name + r"\}|" + name + r"(?![A-Za-z0-9_]))")
        script = used.sub("$1", text[2:-4])
        made = ["xargs", "-I", "{}", "sh", "-c", script, "_", "{}"]
        self.argv([Item(word) for word in made], stdin, depth)

    def source_items(self, stdin: Stdin | None) -> list[Item] | None:
        """The words of the command piped into a command whose input is `stdin` (`find ...
        | xargs rm`), when it is a simple command (its redirections aside); else None."""
        node = stdin.source if stdin is not None else None
        while True:
            node = last_command(node)
            if node is None:
                return None
            items = self.items(node)
            if items is None or len(items) > MAX_WORDS:
                return None
            if not _passes_lines_on(items):
                return items
            node = node.prev_named_sibling  # `find ... | sort | xargs rm`: find's lines

    def assignment(self, node: Any, depth: int) -> None:
        """`GIT_SSH_COMMAND='rm -rf ~' git fetch`: a variable the program runs as a command."""
        name = node.child_by_field_name("name")
        given = node.child_by_field_name("value")
        if name is None or given is None or shellwords.text(name) not in RUNS_VARIABLES:
            return
        self.nested(Item(value(given), given).script(), depth)

    def argv(self, items: list[Item], stdin: Stdin | None, depth: int) -> None:
        """Judge one command given as words."""
        if not items:
            return
        self.in_time()
        if self.settings.get("allow") or self.settings.get("patterns"):
            if self.configured(items):
                return
        program = items[0].literal
        if program is None:
            self.unknown_program(items, stdin, depth)
            return
        self.program_rules(self, os.path.basename(program), items, stdin, depth)

    def configured(self, items: list[Item]) -> bool:
        """Apply `gates.destructive.allow` (True: exempt) and `.patterns` (deny)."""
        argv = [shellwords.shown(item.word) for item in items]
        names = [p for p in self.settings.get("allow") or () if isinstance(p, str)]
        if any(matches(p, argv) for p in names):
            return True
        for extra in self.settings.get("patterns") or ():
            if isinstance(extra, str) and matches(extra, argv):
                self.note(DENY, f"it matches gates.destructive.patterns entry {extra!r}")
        return False

    def unknown_program(self, items: list[Item], stdin: Stdin | None, depth: int) -> None:
        """A program the text does not fix: what a substitution prints is "ask"; a variable
        is judged as each destructive program it could be, at most "ask"."""
        first = items[0]
        if first.node is not None and _has(first.node, ("command_substitution",)):
            self.note(ASK, "it runs a program named by what a command substitution prints")
            return
        if len(items) == 1 or depth > 0:
            self.note(ASK, f"it runs the command held in {shellwords.shown(first.word)!r}")
            return
        for stand_in in ("rm", "sh", "eval", "git", "dd", "chmod"):
            if self.probe([Item(stand_in), *items[1:]], stdin, depth) > NONE:
                self.note(
                    ASK,
                    f"its program {shellwords.shown(first.word)!r} is a variable, "
                    f"and as {stand_in} it would be stopped",
                )
                return

    def probe(self, items: list[Item], stdin: Stdin | None, depth: int) -> int:
        """The level `items` would earn, without counting it in the verdict."""
        kept = (self.level, self.reason)
        self.level, self.reason = NONE, ""
        try:
            self.argv(items, stdin, depth)
            return self.level
        finally:
            self.level, self.reason = kept

    def nested(
        self,
        source: str,
        depth: int,
        cwd: str | None = "same",
        positionals: list[str] | None | str = "same",
    ) -> None:
        """Judge a script run by a command (`sh -c`, `eval`, `ssh HOST CMD`), in the
        directory `cwd` and with the positional parameters `positionals` (`$0`, `$1`, ...;
        None: not known) when they differ from the command's."""
        kept = self.cwd
        if cwd != "same":
            self.cwd = cwd
        if positionals != "same":
            shellwords.positionals.append(None if positionals is None else list(positionals))
        try:
            self.script(source, depth + 1)
        finally:
            self.cwd = kept
            if positionals != "same":
                shellwords.positionals.pop()

    def fed(
        self,
        program: str,
        stdin: Stdin | None,
        depth: int,
        read: Callable[[str], None] | None = None,
    ) -> None:
        """A shell reading its script from standard input (with `read`, an interpreter or
        database client, `read` judging the text): judged when the command line fixes the
        text, else "ask"."""
        if stdin is None:
            return
        if stdin.text is None:
            source = "a file" if stdin.what == "file" else "another command's output"
            self.note(ASK, f"{program} runs what it reads from {source}, which the gate cannot see")
        elif read is None:
            self.nested(stdin.text, depth)
        else:
            read(stdin.text)

    # -- input and output -----------------------------------------------------------------

    def stdin_of(self, node: Any, parent: Any, grand: Any, great: Any, before: Any) -> Stdin | None:
        """Where the command's input comes from (`before`: the named node before it)."""
        found: Stdin | None = None
        if parent is not None and parent.type == "redirected_statement":
            for redirect in parent.children_by_field_name("redirect"):
                found = _redirect_input(redirect) or found
        for child in node.children:
            if child.type in ("file_redirect", "herestring_redirect"):
                found = _redirect_input(child) or found
        if parent is not None and parent.type == "pipeline":
            if before is not None:
                return Stdin(self.producer_text(before), "pipe", before)
            first = parent.child(0)
            if first is not None and first.type in ("|", "|&"):
                holder = great if grand is not None and grand.type == "heredoc_redirect" else None
                body = holder.child_by_field_name("body") if holder is not None else None
                return Stdin(self.producer_text(holder) if body is not None else None, "pipe")
        return found

    def producer_text(self, node: Any) -> str | None:
        """What a pipeline stage writes, when its text fixes it: `echo`/`printf` of literal
        words, `cat` of a heredoc or here-string."""
        if node is None:
            return None
        body = node
        heredoc = None
        if node.type == "redirected_statement":
            body = node.child_by_field_name("body")
            for redirect in node.children_by_field_name("redirect"):
                heredoc = _redirect_input(redirect) or heredoc
        if body is None or body.type != "command":
            return None
        for child in body.children:
            if child.type == "herestring_redirect":
                heredoc = _redirect_input(child)
        name = body.child_by_field_name("name")
        words = [value(a) for a in body.children_by_field_name("argument")]
        program = literal(value(name.children[0])) if name is not None and name.children else None
        if program == "cat" and not words and heredoc is not None:
            return heredoc.text
        if program in ("echo", "printf") and all(literal(w) is not None for w in words):
            shown = [w for w in words if not (program == "echo" and w in ("-n", "-e", "-E"))]
            text = " ".join(shown)
            # printf and `echo -e` decode escapes (`\\x72\\x6d` is `rm`), as `$'...'` does.
            return shellwords.ansi_c(text) if program == "printf" or "-e" in words else text
        return None

    def redirects(self, node: Any, depth: int) -> None:
        """A redirected statement's redirections: the files written, and the command
        reading an output process substitution given what the statement's last command
        writes (`find ... > >(xargs rm)`, `cd x && find ... > >(xargs rm)`)."""
        for redirect in node.children_by_field_name("redirect"):
            if redirect.type == "file_redirect":
                self.file_redirect(redirect)
                given = _stdout_substitution(redirect)
                writer = _stdout_writer(node) if given is not None else None
                if writer is not None:
                    self.reads_substitution(given, Stdin(None, "pipe", writer), depth)

    def file_redirect(self, node: Any) -> None:
        from gates.shellpaths import write_target

        self.in_time()
        operator = next((c.type for c in node.children if not c.is_named), "")
        target = node.child_by_field_name("destination")
        if target is None or operator not in WRITES:
            return
        if operator == ">&" and (target.type == "number" or shellwords.text(target) == "-"):
            return  # `2>&1`: a copy of a descriptor, no file
        level, reason = write_target(value(target), self.cwd)
        self.note(level, reason)


def join_continuations(source: str) -> str:
    """`source` with each unescaped backslash-newline removed, as bash joins lines."""
    if "\\\n" not in source:
        return source
    import re

    return re.sub(r"\\(.)", lambda m: "" if m[1] == "\n" else m[0], source, flags=re.DOTALL)


def _children(node: Any, parent: Any, grand: Any) -> list[tuple]:
    """Stack entries for the node's children, last first: each with its ancestors and the
    named sibling before it."""
    entries = []
    before = None
    for child in node.children:
        entries.append((child, node, parent, grand, before))
        if child.is_named:
            before = child
    entries.reverse()
    return entries


def _read_name(items: list[Item] | None) -> str | None:
    """The variable `read [-r] [-d D] NAME` sets to each line (`REPLY` with none); None
    when the words are not such a `read` (several names, an array, a variable's option)."""
    if not items or items[0].literal != "read":
        return None
    names, at = [], 1
    while at < len(items):
        word = items[at].literal
        if word is None:
            return None
        if word.startswith("-") and len(word) > 1 and not names:
            if "a" in word:
                return None
            # `-d D`, `-p P`, ...: the option's value is the rest of the word or the next one
            taking = next((k for k, c in enumerate(word[1:]) if c in "dpntNui"), None)
            at += 2 if taking is not None and taking == len(word) - 2 else 1
            continue
        names.append(word)
        at += 1
    if len(names) > 1 or names and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", names[0]):
        return None
    return names[0] if names else "REPLY"


def last_command(node: Any) -> Any:
    """The simple command whose output a statement ends with, when it is one (None
    otherwise): the statement itself, its body without its redirections, the one
    statement of a subshell, a `{ ...; }` group or a substitution (`(find ...)`,
    `<(find ...)`), a pipeline's last stage."""
    while node is not None:
        kind = node.type
        if kind == "command":
            return node
        if kind == "redirected_statement":
            node = node.child_by_field_name("body")
        elif kind in (
            "subshell", "compound_statement", "process_substitution", "command_substitution",
            "pipeline",
        ):  # fmt: skip
            inner = [c for c in node.children if c.is_named and c.type != "comment"]
            if not inner or len(inner) > 1 and kind != "pipeline":
                return None
            node = inner[-1]
        else:
            return None
    return None


def _first(name: Any) -> Any:
    return name.children[0] if name.children else name


def _has(node: Any, kinds: tuple[str, ...]) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in kinds:
            return True
        stack.extend(current.children)
    return False


def _stdout_substitution(redirect: Any) -> Any:
    """The output process substitution a redirection sends standard output into (`>
    >(...)`, `>> >(...)`, `1> >(...)`, `&> >(...)`; not `2> >(...)`), else None."""
    given = redirect.child_by_field_name("destination")
    if given is None or not _output_substitution(given):
        return None
    operator = next((c.type for c in redirect.children if not c.is_named), "")
    number = next((c for c in redirect.children if c.type == "file_descriptor"), None)
    if operator not in (">", ">>", ">|", "&>", "&>>"):
        return None
    return given if number is None or shellwords.text(number) == "1" else None


def _stdout_writer(statement: Any) -> Any:
    """The simple command whose output a redirected statement's redirection takes: bash
    redirects the last command of `a | b > f` and `a && b > f` (tree-sitter hangs the
    redirection on the whole). None when it is not one, or is a filter passing on lines
    that do not come from a pipe."""
    node, piped = statement.child_by_field_name("body"), False
    while node is not None and node.type != "command":
        inner = [c for c in node.children if c.is_named and c.type != "comment"]
        if node.type in ("pipeline", "list"):
            piped = node.type == "pipeline" and len(inner) > 1
            node = inner[-1] if inner else None
        elif node.type == "redirected_statement":
            node = node.child_by_field_name("body")
        elif node.type in ("subshell", "compound_statement") and len(inner) == 1:
            node, piped = inner[0], False
        else:
            return None
    if node is None or piped:
        return node
    name = node.child_by_field_name("name")
    program = literal(value(_first(name))) if name is not None else None
    return None if (program or "").rsplit("/", 1)[-1] in PASS_LINES_ON | {"cat"} else node


def _output_substitution(node: Any) -> bool:
    """Whether a node is an output process substitution, `>(...)`."""
    return node.type == "process_substitution" and node.child(0).type == ">("


def _redirect_input(node: Any) -> Stdin | None:
    """The input a redirection gives (None: it is an output redirection)."""
    if node.type == "heredoc_redirect":
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        return Stdin(shellwords.text(body) if body is not None else "", "heredoc")
    if node.type == "herestring_redirect":
        word = next((c for c in node.children if c.is_named), None)
        return Stdin(script_text(word) if word is not None else "", "herestring")
    if node.type == "file_redirect":
        operator = next((c.type for c in node.children if not c.is_named), "")
        if operator in ("<", "<>") and not any(
            c.type == "file_descriptor" and shellwords.text(c) != "0" for c in node.children
        ):
            given = node.child_by_field_name("destination")
            if given is not None and given.type == "process_substitution":
                return Stdin(None, "pipe", given)  # `< <(find ...)`: what it prints
            return Stdin(None, "file")
    return None


def script_text(node: Any) -> str:
    """The text a shell reading this word as a script gets (expansions left as written, so
    the nested reading sees them as unknown)."""
    kind = node.type
    raw = shellwords.text(node)
    if kind == "raw_string":
        return raw[1:-1]
    if kind == "string":
        return shellwords._unescape_in_quotes(raw[1:-1])
    if kind == "ansi_c_string":
        return shellwords.ansi_c(raw[2:-1]).replace(UNKNOWN, "$_")
    if kind == "word":
        out, escaped = [], False
        for char in raw:
            if escaped or char != "\\":
                out.append(char)
                escaped = False
            else:
                escaped = True
        return "".join(out)
    if kind == "concatenation":
        parts, at = [], node.start_byte
        for child in node.children:
            if child.start_byte > at:
                gap = shellwords.raw(node)[
                    at - node.start_byte : child.start_byte - node.start_byte
                ]
                parts.append(gap.decode("utf-8", "replace"))
            parts.append(script_text(child))
            at = child.end_byte
        return "".join(parts)
    return raw


def matches(pattern: str, argv: list[str]) -> bool:
    """Whether `argv` fits a command pattern (first word the program, the others each some
    argument, in any order)."""
    import shlex  # lazy: only configured patterns need these
    from fnmatch import fnmatchcase

    try:
        words = shlex.split(pattern)
    except ValueError:
        words = pattern.split()
    if not words or not argv or not fnmatchcase(os.path.basename(argv[0]), words[0]):
        return False
    return all(any(fnmatchcase(arg, word) for arg in argv[1:]) for word in words[1:])
