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
from gates.shellnodes import (
    FINDERS,
    GREPS,
    Item,
    Stdin,
    children,
    filtered_find,
    first,
    grep_path_tests,
    has_command_substitution,
    join_continuations,
    last_command,
    matches,
    output_substitution,
    passes_lines_on,
    pipeline_stages,
    read_name,
    redirect_input,
    statement_redirects,
    stdout_substitution,
    stdout_writer,
)
from gates.shellpaths import ASK, DENY, NONE
from gates.shellwords import literal, value

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
            elif kind in ("subshell", "compound_statement") and before is not None:
                if parent is not None and parent.type == "pipeline":
                    self.piped_group(node, parent, grand, before, depth)
            elif kind == "redirected_statement":
                # After its body: tree-sitter hangs `cd D && echo x > f`'s redirection on the
                # whole list, and the `cd` moves where `f` lands.
                stack.append((node, AFTER_BODY, None, None, None))
            elif node.is_named and kind not in CONTAINERS:
                self.note(ASK, f"it uses shell syntax the gate does not read ({kind})")
            stack.extend(children(node, parent, grand))

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
        written: Stdin | None = None
        read = False  # what it writes, read once there is a reader
        for child in node.children:
            given = stdout_substitution(child) if child.type == "file_redirect" else None
            if given is None:
                continue
            if not read:
                lines_on = passes_lines_on(items)
                written = stdin if lines_on else Stdin(self.producer_text(node), "pipe", node)
                read = True
            if written is not None:
                self.reads_substitution(given, written, depth)
        if (items[0].literal or "").rsplit("/", 1)[-1] == "tee" and stdin is not None:
            for item in items[1:]:
                if item.node is not None and output_substitution(item.node):
                    self.reads_substitution(item.node, stdin, depth)

    def reads_substitution(self, given: Any, stdin: Stdin, depth: int) -> None:
        """Judge the commands reading the output process substitution `given` (or a
        subshell or group a pipe feeds) on `stdin`: each stage of the pipeline it starts
        with (`>(xargs rm)`, `>(sort | xargs rm)`, `>(while read f; do ...; done)`), fed as
        a pipe at the top level feeds it."""
        inner = [c for c in given.children if c.is_named and c.type != "comment"]
        node = inner[0] if inner else None
        while node is not None and node.type == "list":  # `>(sort && ...)`: sort reads it
            node = next((c for c in node.children if c.is_named), None)
        if node is None:
            return
        flow = stdin
        for stage, redirects in pipeline_stages(node):
            flow = self.fed_stage(stage, redirects, flow, depth)

    def piped_group(self, node: Any, parent: Any, grand: Any, before: Any, depth: int) -> None:
        """`find ... | (sort | xargs rm)`, `find ... | { xargs rm; }`: a subshell or group a
        pipe feeds (`parent`, the pipeline, after the stage `before`) gives what flows in to
        the commands it starts with, as an output process substitution does
        (`reads_substitution`); unless a redirection of its own gives it other input
        (tree-sitter hangs `a | (b) < f`'s on `a | (b)`, the pipeline's statement `grand`)."""
        own = [*node.children]
        if grand is not None and grand.type == "redirected_statement":
            last = next((c for c in reversed(parent.children) if c.is_named), None)
            if last == node:
                own += statement_redirects(grand)
        if any(redirect_input(child) is not None for child in own):
            return
        self.reads_substitution(node, Stdin(self.producer_text(before), "pipe", before), depth)

    def fed_stage(self, stage: Any, redirects: list[Any], stdin: Stdin, depth: int) -> Stdin:
        """Judge one stage of a pipeline inside an output process substitution, with its
        redirections `redirects`, reading `stdin`; give what the next stage reads: what it
        read when it is a filter passing lines on (`sort`, `head`: the lines' source stays
        the command before it), else its own output. A stage reading elsewhere (`sort <
        list.txt`) is left to the walk."""
        own = Stdin(self.producer_text(stage), "pipe", stage)
        if any(redirect_input(r) is not None for r in redirects) or any(
            redirect_input(c) is not None for c in stage.children
        ):
            return own
        if stage.type == "while_statement":
            self.loop(stage, (None, None, None, None), depth, stdin)
            return own
        if stage.type in ("subshell", "compound_statement"):  # `>(sort | (xargs rm))`
            self.reads_substitution(stage, stdin, depth)
            return own
        items = self.items(stage) if stage.type == "command" else None
        if items is None:
            return own
        self.argv(items, stdin, depth)
        self.output_substitutions(stage, items, stdin, depth)
        flows = own
        if passes_lines_on(items):
            flows = Stdin(own.text, "pipe", stdin.source, stdin.words)
            source = self.source_items(stdin)
            if source is not None and (items[0].literal or "").rsplit("/", 1)[-1] in GREPS:
                tests = [grep_path_tests(items)]  # `>(grep -v .git | xargs rm)`
                flows = Stdin(own.text, "pipe", words=filtered_find(source, tests))
        for redirect in redirects:  # `>(sort > >(xargs rm))`
            given = stdout_substitution(redirect)
            if given is not None:
                self.reads_substitution(given, flows, depth)
        return flows

    def items(self, node: Any) -> list[Item] | None:
        """A command node's words, program first (None: it names no program); past
        `MAX_WORDS`, the first words and one more."""
        name = node.child_by_field_name("name")
        if name is None:
            return None
        items = [Item(value(name.children[0] if name.children else name), first(name))]
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
            name = read_name(self.items(condition)) if condition is not None else None
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
        if stdin is not None and stdin.words is not None:
            return stdin.words if len(stdin.words) <= MAX_WORDS else None
        node = stdin.source if stdin is not None else None
        tests: list[list[Item] | None] = []  # what each grep on the way lets through
        while True:
            node = last_command(node)
            if node is None:
                return None
            items = self.items(node)
            if items is None or len(items) > MAX_WORDS:
                return None
            if not passes_lines_on(items):
                return filtered_find(items, tests) if tests else items
            if (items[0].literal or "").rsplit("/", 1)[-1] in GREPS:
                tests.append(grep_path_tests(items))
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
        if first.node is not None and has_command_substitution(first.node):
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
            for redirect in statement_redirects(parent):
                found = redirect_input(redirect) or found
        for child in node.children:
            if child.type in ("file_redirect", "herestring_redirect"):
                found = redirect_input(child) or found
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
            for redirect in statement_redirects(node):
                heredoc = redirect_input(redirect) or heredoc
        if body is None or body.type != "command":
            return None
        for child in body.children:
            if child.type == "herestring_redirect":
                heredoc = redirect_input(child)
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
        for redirect in statement_redirects(node):
            if redirect.type != "file_redirect":
                continue
            self.file_redirect(redirect)
            given = stdout_substitution(redirect)
            if given is None:
                continue
            # What it writes, when its text fixes it (`echo ... > >(sh)`, a heredoc the
            # statement gives `cat`), as a pipe carries it.
            writer = stdout_writer(node)
            alone = writer is None or node.child_by_field_name("body") == writer
            text = self.producer_text(node if alone else writer)
            if writer is not None or text is not None:
                self.reads_substitution(given, Stdin(text, "pipe", writer), depth)

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
