"""What every `gc` command shares: global options, opening the store, input, output.

Layers above `beads` build their click groups with these helpers so every command follows
one contract: `--json`, `--agent` and `--beads-dir` both before and after the subcommand, one
JSON object per reply, one line on stderr per error.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from beads.charclass import BIDI_CONTROLS, CharClass
from beads.cli.arguments import FsPath, fs_path
from beads.errors import GcError, InvalidInput
from beads.records.record import identity_order
from beads.runtime import Runtime

if TYPE_CHECKING:
    from beads.store import Store

F = TypeVar("F", bound=Callable[..., Any])


class Settings:
    """Global options, whichever side of the subcommand they were given on.

    A plain class rather than a dataclass: every command pays for building it at start-up.
    `runtime` is the program's (`beads.runtime`), which `--json` switches to JSON output.
    """

    def __init__(self, runtime: Runtime | None = None) -> None:
        self.runtime = runtime if runtime is not None else Runtime()
        self.beads_dir: str | None = None
        self.city: str | None = None
        self.json = False
        self.agent: str | None = None
        self.debug = False
        self.no_pager = False


def settings(ctx: click.Context | None = None) -> Settings:
    """The global options of the command running in `ctx` (the current one by default)."""
    ctx = ctx or click.get_current_context()
    root = ctx.find_root()
    if root.obj is None:
        root.obj = Settings()
    return root.obj


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    if value not in (None, False):
        setattr(settings(ctx), param.name or "", value)
    if param.name == "city" and value is not None:
        from beads.city import use_city

        use_city(value)  # every later look for the city or its store starts here
    if param.name == "json" and value:
        settings(ctx).runtime.set_output("json")  # no progress line either, like the bars


_GLOBAL_OPTIONS: list[click.Option] = []


def _global_options() -> list[click.Option]:
    """The global options, made once and shared by every command: they hold no state of their
    own, and making 5 options for each of about 100 commands would slow every start-up."""
    if not _GLOBAL_OPTIONS:
        _GLOBAL_OPTIONS.extend(
            [
                click.Option(
                    ["--beads-dir"],
                    type=FsPath(file_okay=False),
                    expose_value=False,
                    callback=_remember,
                    help="The store directory (else $GC_BEADS_DIR, else found from the "
                    "working directory).",
                ),
                click.Option(
                    ["--city"],
                    type=FsPath(file_okay=False),
                    expose_value=False,
                    callback=_remember,
                    help="The Gas City city directory (else $GC_CITY, $GC_CITY_PATH, "
                    "$GC_CITY_ROOT, $GC_DIR, else a city.toml found from the working directory).",
                ),
                click.Option(
                    ["--json", "json"],
                    is_flag=True,
                    expose_value=False,
                    callback=_remember,
                    is_eager=True,
                    help="Print one JSON object.",
                ),
                click.Option(
                    ["--agent"],
                    expose_value=False,
                    callback=_remember,
                    help=f"Act as this agent (else {identity_order()}).",
                ),
                click.Option(
                    ["--no-pager", "no_pager"],
                    is_flag=True,
                    expose_value=False,
                    callback=_remember,
                    help="Print long output straight to the terminal (also GC_PAGER=cat).",
                ),
                click.Option(
                    ["--debug"],
                    is_flag=True,
                    expose_value=False,
                    callback=_remember,
                    hidden=True,
                    help="Show tracebacks.",
                ),
            ]
        )
    return _GLOBAL_OPTIONS


def global_options(func: F) -> F:
    """Add `--json`, `--agent`, `--beads-dir`, `--city`, `--no-pager` and `--debug` to a
    command."""
    if isinstance(func, click.Command):
        func.params.extend(_global_options())
        return func
    # As click.option does: a decorated function collects its parameters in reverse order.
    params = func.__dict__.setdefault("__click_params__", [])
    params.extend(reversed(_global_options()))
    return func


class BeadIdType(click.types.StringParamType):
    """An id argument: text like any other, completed in the shell from the index."""

    name = "id"

    def shell_complete(
        self, ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[Any]:
        from click.shell_completion import CompletionItem

        from beads.index.reader import IndexReader
        from beads.location import find_store

        try:
            with IndexReader(find_store(settings(ctx).beads_dir)) as reader:
                found = reader.index.match_prefix(incomplete, limit=100)
        except Exception:  # no store here, or one we cannot read: nothing to offer
            return []
        return [CompletionItem(bead_id) for bead_id in found]


BEAD_ID = BeadIdType()
# Arguments that name beads, whichever layer's command takes them.
ID_ARGUMENTS = ("ids", "bead_id", "message_id", "gate_id", "decision_id", "thread_or_message_id")


def _nothing() -> None:
    """The body of the command whose parameters `prepare_command` borrows."""


def prepare_command(command: click.Command) -> click.Command:
    """Ready a layer's command tree for `gc`: every group in it takes the global options, so
    they are accepted at the group's position too (`gc bead --json list`), and every id
    argument completes from the index (`BEAD_ID`). Idempotent."""
    for param in command.params:
        if param.name in ID_ARGUMENTS and isinstance(param.type, click.types.StringParamType):
            param.type = BEAD_ID
    if isinstance(command, click.Group):
        if not any(param.name == "json" for param in command.params):
            command.params.extend(click.command()(global_options(_nothing)).params)
        for sub in command.commands.values():
            prepare_command(sub)
    return command


def hidden_alias(old: str, dest: str) -> Callable[[F], F]:
    """Keep a renamed option's old name (`--dedup-key` for `--dedup`) working, hidden from
    help, so scripts written for it keep working; giving both is refused."""
    import functools

    alias = "renamed_" + dest

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(alias)
            if value is not None:
                if kwargs.get(dest) is not None:
                    raise InvalidInput(f"{old} is the old name of --{dest.replace('_', '-')}: "
                                       "give it once")  # fmt: skip
                kwargs[dest] = value
            return func(*args, **kwargs)

        return click.option(old, alias, hidden=True)(command)  # type: ignore[return-value]

    return decorate


def limit_option(func: F) -> F:
    """`--limit N` for a list command: at most N entries (default: all)."""
    return click.option(
        "--limit", type=click.IntRange(min=1), help="Show at most N (default: all)."
    )(func)


class Duration(click.ParamType):
    """A duration option: `90`, `45s`, `10m`, `2h` (`beads.records.times.parse_duration`), in
    seconds,
    at least `minimum`. Unlike click.FloatRange it refuses nan, inf and `1e400`."""

    name = "duration"

    def __init__(self, minimum: float = 0.0) -> None:
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from beads.records.times import parse_duration

        try:
            seconds = parse_duration(value if isinstance(value, str) else str(value))
        except InvalidInput as exc:
            self.fail(exc.message, param, ctx)
        if seconds < self.minimum:
            self.fail(f"{value} is shorter than {self.minimum:g}s", param, ctx)
        return seconds


def one_line(message: str, limit: int = 2000) -> str:
    """`message` as one printable line: line breaks, control characters and undecodable
    bytes escaped (they come from user input quoted in errors), cut at `limit` characters."""
    if not message.isprintable() or not message.isascii():
        message = "".join(
            char if char.isprintable() else repr(char)[1:-1] for char in message[: limit + 1]
        )
    return message if len(message) <= limit else message[:limit] + "..."


# What a terminal acts on rather than shows: C0 controls but tab and newline, DEL, C1
# controls, the bidirectional controls that reorder the text around them (Trojan Source),
# and the line and paragraph separators (U+2028, U+2029), which a reader of the text (a
# person's viewer, an agent) may take for a line break that was never there.
_CONTROLS = CharClass(
    f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}\u2028\u2029]", "[\x00-\x08\x0b-\x1f\x7f]"
)


def terminal_safe(text: str) -> str:
    """`text` with every control character a terminal would act on shown as an escape
    (`ESC[2J` -> `\\x1b[2J`), so stored text never clears a screen or retitles a window.
    Every text reply goes through it (`emit`, `page`); JSON replies keep the text exact."""
    if _CONTROLS.search(text) is None:
        return text
    return _CONTROLS.sub(lambda m: repr(m.group())[1:-1], text)


def open_store() -> Store:
    """The store for this command, closed when the command ends."""
    from beads.store import Store

    options = settings()
    store = Store.open(options.beads_dir, agent=options.agent)
    click.get_current_context().call_on_close(store.close)
    return store


def command_name(ctx: click.Context) -> str:
    """`gc bead create` -> `bead.create`."""
    return ".".join(ctx.command_path.split()[1:])


def emit(
    payload: dict[str, Any],
    text: str | Callable[[], str] | None = None,
    *,
    error: GcError | None = None,
) -> None:
    """Reply: the JSON object with --json, else `text` (if any) on stdout.

    With `error`, the command answered but failed (a damaged store found by `gc doctor`): the
    JSON reply says `"ok": false` with the error object beside the payload, so `ok` always
    agrees with the exit code the caller then sets (`error.exit_code`).
    """
    ctx = click.get_current_context()
    if settings(ctx).json:
        head: dict[str, Any] = {"ok": error is None, "command": command_name(ctx)}
        if error is not None:
            head["error"] = error.to_json()
        click.echo(json.dumps({**head, **payload}))
    elif text is not None:
        rendered = text() if callable(text) else text
        if rendered:
            show(terminal_safe(rendered))
    if error is not None:
        click.echo(f"gc: {one_line(error.message)}", err=True)


def json_text(value: Any, **options: Any) -> str:
    """`value` as JSON in a text reply (`gc config get KEY`): its characters as they are on a
    UTF-8 stdout, `\\u` escapes on any other (a legacy locale), where the stream would
    write some as Python's escapes (`\\U0001f600`), which are not JSON."""
    import codecs

    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    return json.dumps(value, ensure_ascii=codecs.lookup(encoding).name != "utf-8", **options)


def answer_no(payload: dict[str, Any], text: str | None = None) -> NoReturn:
    """Reply "no" to a yes/no command (nothing unread, nothing woke, no answer yet): an
    answer, not an error, so `"ok": true` with the payload's false `found`/`woke`, `text`
    (if any) on stdout, and exit 10."""
    from beads.errors import NoMatch

    emit(payload, text)
    click.get_current_context().exit(NoMatch.exit_code)


def stamped(record: dict[str, Any], *names: str) -> dict[str, Any]:
    """`record` with its Unix times `names` as RFC 3339 UTC, as beads show theirs: every JSON
    reply gives times one way (databases of derived data keep seconds)."""
    from beads.records.times import stamp_at

    return {
        key: stamp_at(value) if key in names and isinstance(value, int | float) else value
        for key, value in record.items()
    }


@contextlib.contextmanager
def progress_bar(steps: int, label: str) -> Iterator[Callable[[str], None]]:
    """A progress bar of `steps` named steps on stderr, for long work (`gc doctor --gc`,
    an index rebuild); yields the function each step calls with its name. Silent unless
    stderr is a terminal, and with `--json`."""
    if settings().json or sys.stderr is None or not sys.stderr.isatty():
        yield lambda name: None
        return
    with click.progressbar(length=steps, label=label, file=sys.stderr) as bar:
        started = [False]

        def advance(name: str) -> None:
            if started[0]:
                bar.update(1)
            started[0] = True
            bar.label = f"{label}: {name}"
            bar.render_progress()

        yield advance
        bar.update(steps - bar.pos)


def show(text: str) -> None:
    """Print text for a person: through a pager when it is longer than the terminal, as git
    does (`$GC_PAGER`, else `$PAGER`, else `less` with `LESS=FRX`; `--no-pager`, or a pager
    of `cat` or "", prints it straight); piped output is never paged."""
    pager = os.environ.get("GC_PAGER", os.environ.get("PAGER"))
    if (
        settings().no_pager
        or (pager is not None and pager.strip() in ("", "cat"))
        or sys.stdout is None
        or not (sys.stdout.isatty() and sys.stdin.isatty())
        or text.count("\n") + 1 < _terminal_lines()
    ):
        click.echo(text)
        return
    if pager is not None:
        import shlex

        try:
            shlex.split(pager)  # click splits it so; say what is wrong before it does
        except ValueError as exc:
            raise InvalidInput(f"cannot run the pager {pager!r}: {exc}") from None
        os.environ["PAGER"] = pager
    os.environ.setdefault("LESS", "FRX")  # quit if one screen, keep colours, no clearing
    click.echo_via_pager(text)


def _terminal_lines() -> int:
    import shutil  # only on a terminal: it pulls in bz2 and lzma, which every command would pay for

    return shutil.get_terminal_size().lines


def read_text(
    text: str | None, path: str | None, use_stdin: bool, *, limit: int, what: str = "body"
) -> str | None:
    """The text from exactly one of an option, a file (`-` = stdin) or stdin, checked.

    Reads at most `limit + 1` bytes, so an oversized input is refused without filling memory.
    """
    given = [x for x in (text is not None, path is not None, use_stdin) if x]
    if len(given) > 1:
        raise InvalidInput(f"give the {what} once: --{what}, --{what}-file or --stdin")
    if text is not None:
        raw = text.encode("utf-8", "surrogateescape")
    elif path is not None or use_stdin:
        if path is not None and path != "-":
            try:
                with open(fs_path(path), "rb") as handle:
                    raw = handle.read(limit + 1)
            except OSError as exc:
                raise InvalidInput(f"cannot read {what} file {path}: {exc.strerror}") from None
        else:
            if sys.stdin is None:  # closed by whoever started us (`<&-`)
                raise InvalidInput(f"cannot read the {what} from stdin: it is closed")
            raw = sys.stdin.buffer.read(limit + 1)
    else:
        return None
    if len(raw) > limit:
        raise InvalidInput(
            f"{what} is larger than the limit of {limit} bytes (store.max_body_bytes)"
        )
    if b"\x00" in raw:
        raise InvalidInput(f"{what} contains NUL bytes: binary data is not accepted")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(
            f"{what} is not valid UTF-8 text (binary data is not accepted)"
        ) from None


def parse_pairs(pairs: tuple[str, ...], what: str = "--meta") -> dict[str, str]:
    """`KEY=VALUE` options as a mapping."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidInput(f"{what} takes KEY=VALUE, not {pair!r}")
        out[key] = value
    return out


def table(rows: Sequence[Sequence[str]], width: int | None = None) -> str:
    """Rows as aligned text: every column but the last padded to its widest cell, two spaces
    apart (the last, often long, runs free); "" for no rows.

    A cell is one line whatever it holds (a newline or tab in a subject shows as `\\n`,
    `\\t`). The table fits `width` (default: `output_width()`, the terminal's): the widest
    columns are cut first, a cut cell ending in `…`."""
    if not rows:
        return ""
    cells = [[_cell(cell) for cell in row] for row in rows]
    natural = [max(len(row[c]) for row in cells) for c in range(len(cells[0]))]
    limit = output_width() if width is None else width
    caps = _fit(natural, limit) if limit else natural
    lines = []
    for row in cells:
        cut = [cell if len(cell) <= cap else cell[: max(cap - 1, 0)] + "…"
               for cell, cap in zip(row, caps, strict=False)]  # fmt: skip
        padded = [cell.ljust(cap) for cell, cap in zip(cut[:-1], caps, strict=False)]
        lines.append("  ".join([*padded, cut[-1]]).rstrip())
    return "\n".join(lines)


def _cell(text: str) -> str:
    if "\n" in text or "\t" in text or "\r" in text:
        text = text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t")
    return text


def _fit(widths: list[int], limit: int) -> list[int]:
    """Column widths cut to one cap, the largest that makes the row fit `limit`. The first
    column (ids) is never cut, nor any below 8 characters: a very narrow terminal gets rows
    wider than it rather than unreadable cells."""
    room = limit - 2 * (len(widths) - 1) - widths[0]
    rest = widths[1:]
    cap = max(rest, default=0)
    while cap > 8 and sum(min(w, cap) for w in rest) > room:
        cap -= 1
    return [widths[0], *(min(w, cap) for w in rest)]


def output_width() -> int | None:
    """The width text output must fit: the terminal's (`$COLUMNS` overrides it) when stdout
    is one, else None: piped output is never cut, as git's."""
    if sys.stdout is not None and sys.stdout.isatty():
        import shutil  # only on a terminal (see _terminal_lines)

        return shutil.get_terminal_size().columns
    return None
