"""GNU parallel's command read as parallel reads it, for the destructive-op gate's wrappers
(`gates.rules_wrappers`): its replacement strings, and the commands it runs on the arguments
after `:::` or on the lines it reads.

The replacement strings (as GNU parallel 20221122 puts them in): `{}` the line or argument
(`-I R` renames it R), `{.}` without its extension, `{/}` its base name, `{//}` its folder,
`{/.}` its base name without extension; each of them positional too, for the argument of
one input source (`{1}`, `{1.}`, ..., `{-1}` from the end; `{1}` only while `{}` keeps its
name); `{= perl =}` (`{=1 perl =}`), an argument changed by a perl expression, which can run
over several words (parallel joins its command's words with spaces), read as the argument
itself; `{#}` and `{%}`, the job's number and slot.
"""

from __future__ import annotations

import re
from itertools import product

from gates.shelljudge import MAX_WORDS
from gates.shellnodes import UNKNOWN_TARGETS, Item
from gates.shellwords import UNKNOWN, as_text

# The line's replacement strings, as `gates.rules_wrappers` hands them to find's `-exec`
# (then fd's placeholders), and the job's number and slot, which are no path.
PARALLEL_STRINGS = ("{}", "{.}", "{/}", "{//}", "{/.}")
PARALLEL_NUMBERS = ("{#}", "{%}")
SOURCES = (":::", "::::", ":::+", "::::+")  # what starts an input source's arguments
MAX_JOBS = 64  # jobs judged one by one at most: past it, one with any of the arguments
REPLACEMENT = re.compile(r"\{(-?[0-9]+)?(//|/\.|/|\.)?\}|\{=(-?[0-9]+)?(.*?)=\}|\{#\}|\{%\}", re.S)


def canonical(rest: list[Item], marker: str) -> list[Item]:
    """parallel's command words with each replacement string written as the one of
    `PARALLEL_STRINGS` it makes of a line (a positional one as the line's, a perl
    expression as `{}`), for reading the lines it reads as find's `-exec` would."""
    pattern = _pattern(marker)

    def put(match: re.Match) -> str:
        reading = _reading(match, marker)
        if reading is None or reading[0] == "number":
            return match[0]
        return "{" + reading[2] + "}"

    out = []
    for item in _joined(rest):
        word = pattern.sub(put, item.word)
        out.append(item if word == item.word else Item(word, None, pattern.sub(put, item.script())))
    return out


def commands(rest: list[Item], marker: str, colsep: str | None = None) -> list[list[Item]]:
    """The commands parallel runs: with `:::` (`::::` files, whose lines are unknown; `:::+`
    linked one to one with the source before it), one for each job, its arguments put in
    for the replacement strings (added at the end when none is written; with `--colsep`,
    the positional ones are the columns of its arguments); else on a line it reads, unknown
    (`UNKNOWN_TARGETS` for a whole word)."""
    rest = _joined(rest)
    cut = next((k for k, item in enumerate(rest) if item.literal in SOURCES), None)
    run = rest if cut is None else rest[:cut]
    pattern = _pattern(marker)
    written = any(
        _reading(match, marker) is not None for item in run for match in pattern.finditer(item.word)
    )
    if cut is None:
        return [_put_in(run, pattern, marker, None) if written else [*run, Item(UNKNOWN_TARGETS)]]
    groups = _sources(rest[cut:])
    if cut == 0:  # no command: each argument is one
        return [[Item("eval"), *(arg for _linked, args in groups for arg in args)]]
    if not written:
        return [[*run, *(arg for _linked, args in groups for arg in args)]]
    return [_put_in(run, pattern, marker, _columns(job, colsep)) for job in _jobs(groups)]


def numbered(item: Item) -> Item:
    """`item` with parallel's job number and slot (`{#}`, `{%}`) put in as `1`."""
    if not any(s in item.word for s in PARALLEL_NUMBERS):
        return item
    word, text = item.word, item.script()
    for number in PARALLEL_NUMBERS:
        word, text = word.replace(number, "1"), text.replace(number, "1")
    return Item(word, None, text)


def _pattern(marker: str) -> re.Pattern:
    """The replacement strings with `-I`'s `marker` among them."""
    if marker == "{}":
        return REPLACEMENT
    return re.compile(re.escape(marker) + "|" + REPLACEMENT.pattern, re.S)


def _reading(match: re.Match, marker: str) -> tuple[str, int | None, str] | None:
    """What a match of `_pattern` stands for: ("line" or "perl", the input source's number
    or None for all of them, the change: "", ".", "/", "//", "/."), ("number", None, "");
    None when parallel leaves it as text (`{}` and `{1}` once `-I` renames `{}`)."""
    found = match[0]
    if marker != "{}" and found == marker:
        return ("line", None, "")
    if found in PARALLEL_NUMBERS:
        return ("number", None, "")
    if found.startswith("{="):
        return ("perl", int(match[3]) if match[3] else None, "")
    if marker != "{}" and not match[2]:
        return None
    return ("line", int(match[1]) if match[1] else None, match[2] or "")


def _joined(rest: list[Item]) -> list[Item]:
    """The words with a perl expression written over several (`{= s/a/b/ =}`) made one, as
    parallel joins them with spaces."""
    out: list[Item] = []
    held: list[Item] = []
    for item in rest:
        if held:
            held.append(item)
            if "=}" in item.word:
                words = " ".join(i.word for i in held)
                out.append(Item(words, None, " ".join(i.script() for i in held)))
                held = []
        elif (at := item.word.rfind("{=")) >= 0 and "=}" not in item.word[at + 2 :]:
            held = [item]
        else:
            out.append(item)
    return out + held


def _sources(tail: list[Item]) -> list[tuple[bool, list[Item]]]:
    """The input sources after the command (`tail` starts with `:::` or `::::`): whether
    each is linked to the one before (`:::+`), and its arguments (a file's lines unknown)."""
    groups: list[tuple[bool, list[Item]]] = []
    for item in tail:
        if item.literal in SOURCES:
            arguments = [Item(UNKNOWN_TARGETS)] if item.literal.startswith("::::") else []
            groups.append((item.literal.endswith("+"), arguments))
        elif not groups[-1][1] or groups[-1][1][0].word != UNKNOWN_TARGETS:
            groups[-1][1].append(item)
    return groups


Job = tuple[list[Item], ...]  # for each input source, the arguments it can give there


def _jobs(groups: list[tuple[bool, list[Item]]]) -> list[Job]:
    """Each job's arguments, one from each input source: every combination of the sources,
    a linked one paired with the one before it (the shorter ends them); past `MAX_JOBS`
    (or with none), one job whose every source can give any of its arguments."""
    columns: list[list[tuple[Item, ...]]] = []
    for linked, arguments in groups:
        if linked and columns:
            columns[-1] = [(*got, arg) for got, arg in zip(columns[-1], arguments, strict=False)]
        else:
            columns.append([(arg,) for arg in arguments])
    jobs: list[tuple[Item, ...]] = [()]
    for column in columns:
        if len(jobs) * len(column) > MAX_JOBS:
            jobs = []
            break
        jobs = [(*job, *got) for job in jobs for got in column]
    if not jobs:
        return [tuple(arguments for _linked, arguments in groups)]
    return [tuple([arg] for arg in job) for job in jobs]


def _columns(job: Job, colsep: str | None) -> Job:
    """The job's arguments split into columns at `--colsep`'s pattern (a perl regular
    expression: as Python reads it), each a source of its own; as they are without one, or
    when an argument is not known or the pattern not read."""
    if colsep is None or any(len(given) != 1 or given[0].literal is None for given in job):
        return job
    try:
        split = re.compile(colsep).split
        return tuple([Item(column)] for given in job for column in split(given[0].word))
    except (re.error, OverflowError, RecursionError, TypeError):
        return job


def _put_in(run: list[Item], pattern: re.Pattern, marker: str, job: Job | None) -> list[Item]:
    """The command `run` with its replacement strings put in from `job`'s arguments (None:
    a line not known, `UNKNOWN_TARGETS` for a whole word). A replacement string alone as a
    word is each argument it can give, as a word; a word holding them is a word for each
    way they can be put in (`{}` of several sources: joined with spaces), unknown past
    `MAX_WORDS` words."""
    out: list[Item] = []
    for item in run:
        whole = pattern.fullmatch(item.word)
        reading = _reading(whole, marker) if whole is not None else None
        if reading is not None and reading[0] != "number":
            if job is None:
                out.append(Item(UNKNOWN_TARGETS))
            else:
                out += [_changed(arg, reading[2]) for arg in _picked(job, reading[1])]
            continue
        found = [m for m in pattern.finditer(item.word) if _reading(m, marker) is not None]
        if not found:
            out.append(item)
            continue
        script = item.script()
        in_text = [m for m in pattern.finditer(script) if _reading(m, marker) is not None]
        aligned = [m[0] for m in in_text] == [m[0] for m in found]
        options = [_options(m, marker, job) for m in found]
        ways = 1
        for given in options:
            ways *= len(given)
        if not 0 < ways <= MAX_WORDS - len(out):
            options = [given if len(given) == 1 else [UNKNOWN] for given in options]
        for values in product(*options):
            word = _rebuilt(item.word, found, values)
            text = _rebuilt(script, in_text, [as_text(v) for v in values]) if aligned else None
            out.append(Item(word, None, text if text is not None else as_text(word)))
    return out


def _options(match: re.Match, marker: str, job: Job | None) -> list[str]:
    """The values a replacement string inside a word can have (`UNKNOWN`: not known)."""
    reading = _reading(match, marker)
    if reading is None:
        return [match[0]]
    if reading[0] == "number":
        return ["1"]
    if job is None:
        return [UNKNOWN]
    _kind, number, change = reading
    values = []
    for combination in product(*_sources_of(job, number)):
        values.append(" ".join(_changed(arg, change).word for arg in combination))
        if len(values) > MAX_WORDS:
            return [UNKNOWN]
    return values


def _rebuilt(word: str, found: list[re.Match], values: list[str] | tuple[str, ...]) -> str:
    """`word` with each match in `found` replaced by the value at its place in `values`."""
    parts, at = [], 0
    for match, given in zip(found, values, strict=True):
        parts += [word[at : match.start()], given]
        at = match.end()
    return "".join(parts) + word[at:]


def _sources_of(job: Job, number: int | None) -> Job:
    """The input sources a replacement string takes from: `number`'s (past the last: an
    empty word); all of them for `{}` and `{0}`, and for a count from the end past the
    first (parallel then puts in one of them or none)."""
    if number is None or number == 0:
        return job
    if number > 0:
        return (job[number - 1],) if number <= len(job) else ([Item("")],)
    return (job[number],) if -number <= len(job) else job


def _picked(job: Job, number: int | None) -> list[Item]:
    """The arguments the sources `_sources_of` gives can put in."""
    return [arg for given in _sources_of(job, number) for arg in given]


def _changed(arg: Item, change: str) -> Item:
    """The argument as a replacement string's `change` gives it: "" as is, "." without its
    extension, "/" its base name, "//" its folder, "/." its base name without extension."""
    if not change:
        return arg
    word = arg.word
    if change == "//":
        bare = word.rstrip("/")
        if not bare:
            word = "/" if word else "."
        else:
            word = (bare.rsplit("/", 1)[0].rstrip("/") or "/") if "/" in bare else "."
    elif change in ("/", "/."):
        word = word.rsplit("/", 1)[-1]
    if change in (".", "/."):
        word = re.sub(r"\.[^/.]*$", "", word)
    return arg if word == arg.word else Item(word, None, as_text(word))
