"""Command-line options read as the tools read them: clustered short flags, long options
and their unique (or, conservatively, ambiguous) abbreviations, repeats, values, `--`."""

from __future__ import annotations


class Options:
    """What one reading of an argument list found."""

    __slots__ = ("flags", "values", "positionals", "after_dashdash")

    def __init__(self) -> None:
        self.flags: list[str] = []  # every option seen, repeats kept, by its canonical name
        self.values: dict[str, list[str]] = {}
        self.positionals: list[int] = []  # indexes into the argument list
        self.after_dashdash: bool = False

    def has(self, *names: str) -> bool:
        return any(name in self.flags for name in names)

    def count(self, *names: str) -> int:
        return sum(self.flags.count(name) for name in names)


def read(
    args: list[str | None],
    short_values: str = "",
    longs: dict[str, bool] | None = None,
    *,
    stop_at_first_positional: bool = False,
) -> Options:
    """Read `args` (None: a word whose value is unknown, taken as a positional).

    `short_values`: the short options that take a value; `longs`: long option names, True
    when they take a value. An abbreviation counts as every long option it can stand for.
    """
    longs = longs or {}
    out = Options()
    index = 0
    while index < len(args):
        arg = args[index]
        if arg is None or out.after_dashdash or arg == "-" or not arg.startswith("-"):
            out.positionals.append(index)
            index += 1
            if stop_at_first_positional:
                out.positionals.extend(range(index, len(args)))
                return out
            continue
        if arg == "--":
            out.after_dashdash = True
            index += 1
            continue
        if arg.startswith("--"):
            name, eq, given = arg[2:].partition("=")
            names = [name] if name in longs else [n for n in longs if n.startswith(name)]
            if not names:
                names = [name]
            takes = any(longs.get(n, False) for n in names)
            if takes and not eq:
                given = args[index + 1] or "" if index + 1 < len(args) else ""
                index += 1
            for n in names:
                out.flags.append(n)
                if eq or takes:
                    out.values.setdefault(n, []).append(given)
            index += 1
            continue
        cluster = arg[1:]
        for at, letter in enumerate(cluster):
            out.flags.append(letter)
            if letter in short_values:
                rest = cluster[at + 1 :]
                if not rest and index + 1 < len(args):
                    rest = args[index + 1] or ""
                    index += 1
                out.values.setdefault(letter, []).append(rest)
                break
        index += 1
    return out
