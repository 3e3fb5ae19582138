"""The YAML codec: canonical files and load(dump(b)) == b for every valid bead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import event, given
from hypothesis import strategies as st

from beads import codec, directyaml
from beads.codec import dump_bead, dump_data, load_bead
from beads.record import FIELD_ORDER, Bead
from beads.store import Store

AGENT = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True).filter(
    lambda a: a != "all"
)
ID = st.from_regex(r"[a-z][a-z0-9]{0,5}-[a-z2-7]{8}", fullmatch=True)
STAMP = st.datetimes(min_value=__import__("datetime").datetime(1970, 1, 1)).map(
    lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
)
TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=200
)
LINE = TEXT.map(lambda t: t.replace("\n", " ").replace("\r", " ")).filter(lambda t: t.strip())
SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | TEXT
    | st.floats(allow_nan=False, allow_infinity=False)
)
META_KEY = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.-]{0,10}", fullmatch=True)
META = st.dictionaries(
    META_KEY,
    st.recursive(
        SCALAR,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(META_KEY, inner, max_size=3),
        max_leaves=6,
    ),
    max_size=4,
)


@st.composite
def beads(draw: st.DrawFn) -> Bead:
    closed = draw(st.booleans())
    return Bead(
        id=draw(ID),
        type=draw(st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True)),
        title=draw(LINE.map(lambda t: t[:500])),
        body=draw(TEXT),
        sender=draw(AGENT),
        status="closed" if closed else "open",
        assignee=draw(st.none() | AGENT),
        cc=draw(st.lists(AGENT, max_size=3, unique=True)),
        labels=draw(
            st.lists(
                st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:/=-]{0,12}", fullmatch=True),
                max_size=3,
                unique=True,
            )
        ),
        priority=draw(st.integers(0, 4)),
        thread=draw(st.none() | ID),
        reply_to=draw(st.none() | ID),
        parent=draw(st.none() | ID),
        created_at=draw(STAMP),
        updated_at=draw(STAMP),
        closed_at=draw(STAMP) if closed else None,
        close_reason=draw(st.none() | TEXT) if closed else None,
        meta=draw(META),
    )


@given(beads())
def test_load_of_dump_is_the_same_bead(bead: Bead) -> None:
    bead.validate()
    assert load_bead(dump_bead(bead)) == bead


@given(beads())
def test_fields_are_written_in_canonical_order(bead: Bead) -> None:
    lines = dump_bead(bead).decode().splitlines()
    top_keys = [
        line.split(":")[0]
        for line in lines
        if line and not line[0].isspace() and not line.startswith("-") and ":" in line
    ]
    assert [k for k in top_keys if k in FIELD_ORDER] == list(FIELD_ORDER)


def test_multiline_text_is_a_block_scalar() -> None:
    bead = Bead(
        id="gc-abcdefgh",
        type="task",
        title="t",
        sender="mayor",
        body="one\ntwo\n",
        created_at="2026-01-01T00:00:00.000000Z",
        updated_at="2026-01-01T00:00:00.000000Z",
    )
    text = dump_bead(bead).decode()
    assert "body: |\n  one\n  two\n" in text


def test_a_one_word_change_is_a_one_line_diff() -> None:
    base = Bead(
        id="gc-abcdefgh",
        type="task",
        title="A title",
        sender="mayor",
        body="x " * 100,
        created_at="2026-01-01T00:00:00.000000Z",
        updated_at="2026-01-01T00:00:00.000000Z",
    )
    before = dump_bead(base).decode().splitlines()
    after = dump_bead(base.with_changes(title="A new title")).decode().splitlines()
    assert len([1 for a, b in zip(before, after, strict=True) if a != b]) == 1


# -- the direct writer (`_fast_dump`) must write exactly what ruamel writes -------------------

# Text that sits on every edge of libyaml's choice between plain, single- and double-quoted.
# fmt: off
EDGY = st.sampled_from(
    [
        "", " ", "  ", "a ", " a", "a  b", "'", "''", "it's", 'a"b', "a\tb", "a\x85b", "\u2028",
        "\u2029", "a\ufeffb", "\xa0", "\xa0x", "x\xa0", "\ufffd", "\ufffe", "\U0001f600", "-",
        "--", "---", "---x", "...", "..", ".. x", "-a", "- a", "-- x", "?", "?x", "? x", ":",
        ":a", "x:", "x: ", "a:b", "a: b", "a#b", "a #b", "#a", "a -", "a ?", "1:20", "@x", "%x",
        "!x", "&x", "*x", "|x", ">x", "[x", "x]", "{x", "x}", "x,y", "x, y", "`x", "=", "<<",
        "~", "null", "Null", "NULL", "nULL", "true", "True", "FALSE", "fAlse", "yes", "no", "on",
        "off", "y", "n", "123", "-3", "+1", "1.5", "-.5", ".5", "1e3", "1_000", "0x1f", "0o7",
        "0b1", ".inf", "-.inf", ".nan", ".NaN", "NaN", "2026-01-01",
        "2026-01-31T12:00:00.000000Z", "2026-01-31 12:00:00", "é", "a" * 999, "a" * 1001,
    ]
)
# fmt: on
FAST_TEXT = EDGY | TEXT | st.text(st.sampled_from(" -:#?'\"ab1.,[]{}!&*|>%@`\xa0\t\n"), max_size=8)
FAST_SCALAR = st.none() | st.booleans() | st.integers() | FAST_TEXT
FAST_KEY = META_KEY | EDGY
FAST_META = st.dictionaries(
    FAST_KEY,
    st.recursive(
        FAST_SCALAR,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(FAST_KEY, inner, max_size=3),
        max_leaves=8,
    ),
    max_size=5,
)


def check_direct_writer(data: dict) -> None:
    """The direct writer writes what ruamel writes, or leaves `data` to ruamel, whose output
    then reads back as `data`."""
    fast = directyaml.dump(data)
    event("direct" if fast is not None else "ruamel")
    written = dump_data(data)
    if fast is not None:
        assert fast == written
    else:
        assert codec.load_data(written) == data


@given(beads(), FAST_TEXT, FAST_TEXT, FAST_META)
def test_the_direct_writer_writes_what_ruamel_writes(
    bead: Bead, title: str, reason: str, meta: dict
) -> None:
    data = bead.to_dict()
    data.update(title=title, close_reason=reason, body=title, meta=meta)
    check_direct_writer(data)


BLOCK_TEXT = st.text(st.sampled_from(" \n\n\nab#:-|>'\"é\t\xa0"), min_size=1, max_size=30)


@given(beads(), BLOCK_TEXT, BLOCK_TEXT)
def test_multi_line_text_is_written_as_ruamel_writes_it(bead: Bead, body: str, note: str) -> None:
    data = bead.to_dict()
    data.update(body=body, meta={"note": note, "deeper": {"note": note}})
    check_direct_writer(data)


# What the direct writer must take (never leave to ruamel): text of printable characters up
# to its length limit, lines without trailing spaces, plain keys; None, bools, ints, lists
# of those, nested mappings. Only floats, long or unprinted text and odd keys go to ruamel.
CANON_TEXT = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFFFD, blacklist_categories=("Cs", "Cc"),
                  blacklist_characters="\u2028\u2029\ufeff"),
    max_size=60,
)  # fmt: skip
CANON_LINE = CANON_TEXT.map(str.rstrip)
CANON_BLOCK = st.builds(  # lines, a last one not empty, and at most one final line break
    lambda lines, last, end: "\n".join([*lines, last]) + end,
    st.lists(CANON_LINE, min_size=1, max_size=4),
    CANON_LINE.filter(bool),
    st.sampled_from(["", "\n"]),
)
CANON_KEY = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True).filter(
    lambda k: k not in ("null", "true", "false")
)
CANON_SCALAR = st.none() | st.booleans() | st.integers() | CANON_TEXT
CANON_META = st.dictionaries(
    CANON_KEY,
    st.recursive(
        CANON_SCALAR | CANON_BLOCK,
        lambda inner: st.lists(CANON_SCALAR, max_size=3) | st.dictionaries(CANON_KEY, inner),
        max_leaves=6,
    ),
    max_size=4,
)


@given(beads(), CANON_TEXT.filter(str.strip), CANON_BLOCK | CANON_TEXT, CANON_META)
def test_the_direct_writer_takes_every_canonical_bead(
    bead: Bead, title: str, body: str, meta: dict
) -> None:
    data = bead.to_dict()
    data.update(title=title, body=body, meta=meta)
    if data["close_reason"] is not None:
        data["close_reason"] = title
    fast = directyaml.dump(data)
    assert fast is not None, data
    assert fast == dump_data(data)


@given(beads())
def test_dump_bead_is_ruamel_byte_for_byte(bead: Bead) -> None:
    assert dump_bead(bead) == dump_data(bead.to_dict())


def test_a_gate_takes_the_direct_writer() -> None:
    bead = Bead(
        id="gc-abcdefgh",
        type="gate",
        title="after gc-bcdefghi",
        sender="mayor",
        status="closed",
        created_at="2026-01-01T00:00:00.000000Z",
        updated_at="2026-01-01T00:00:00.000000Z",
        closed_at="2026-01-01T00:00:00.000000Z",
        close_reason="resolved: gc-bcdefghi closed",
        meta={"guarded": True, "await_type": "bead", "waiters": ["dog"], "timeout": None,
              "state": "resolved", "n": -3, "nested": {"e": {}, "l": []}},
    )  # fmt: skip
    assert codec._fast(), "ruamel.yaml.clib is a dependency: its C emitter should be in use"
    assert "CEmitter" in codec._yaml().Emitter.__name__  # the emitter the writer mirrors
    fast = directyaml.dump(bead.to_dict())
    assert fast is not None and fast == dump_data(bead.to_dict())
    assert load_bead(fast) == bead


def test_shared_containers_are_written_in_full_never_as_aliases() -> None:
    # The store's reader refuses anchors and aliases (issue 10): the writers never make them.
    shared = ["a", "b"]
    empty: list = []
    data = {"meta": {"x": shared, "y": shared, "e": empty, "f": empty}}
    written = dump_data(data)
    assert b"&" not in written and b"*" not in written
    assert directyaml.dump(data) == written
    assert codec.load_data(written) == data


def test_the_copied_resolver_rules_are_ruamels() -> None:
    # The direct writer quotes what ruamel's resolver would read back as a non-string; it
    # keeps its own copy of the rules so a dump never imports ruamel. Same rules, same flags.
    from ruamel.yaml.resolver import Resolver

    theirs = {
        first: [(str(tag).rsplit(":", 1)[-1], rx.pattern, rx.flags) for tag, rx in rules]
        for first, rules in Resolver().yaml_implicit_resolvers.items()
    }
    ours = {
        first: [(tag, rx.pattern, rx.flags) for tag, rx in zip(
            [rule[0] for rule in rules], directyaml._implicit(first), strict=True)]
        for first, rules in directyaml.IMPLICIT_RULES.items()
    }  # fmt: skip
    assert ours == theirs


def test_writing_a_plain_bead_never_imports_ruamel(tmp_path: Path) -> None:
    # Importing ruamel costs a command tens of ms: a mail send must not pay it.
    code = (
        "import sys\n"
        "from beads.store import Store\n"
        "from mail.beadmail import BeadMail\n"
        "store = Store.open(sys.argv[1], agent='dog')\n"
        "BeadMail(store).send('dog', 'cat', 'lunch?', 'at noon, the usual place')\n"
        "store.close()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('ruamel', '_ruamel'))))"
    )
    Store.init(tmp_path, agent="dog")[0].close()
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert out.strip() == "[]"
    with Store.open(tmp_path) as store:  # and the file is what ruamel would have written
        message = store.list(type="message")[0]
        assert store.view.read(store.index.location(message.id)[0]) == dump_data(message.to_dict())


@given(st.text(alphabet="0123456789abcdefxoXOBeEtTzZ_.:+- \tgq", max_size=25), st.integers(0, 9))
def test_the_digit_shortcut_agrees_with_the_resolver_rules(rest: str, digit: int) -> None:
    # Text starting with a digit skips the number and time rules when it has a letter none
    # of them allows: it must decide as the rules would.
    text = f"{digit}{rest}"
    if text[-1] == " " or ": " in text or " #" in text or text[-1] == ":":
        return
    by_rules = not any(rule.match(text) for rule in directyaml._implicit(text[0]))
    assert directyaml._plain_allowed(text) == by_rules


# -- the direct reader (`_fast_load`) must read exactly what ruamel reads ---------------------


def ruamel_load(text: str) -> object:
    return codec._yaml().load(text)


@given(beads(), FAST_TEXT, CANON_BLOCK | CANON_TEXT, FAST_META)
def test_the_direct_reader_reads_what_ruamel_reads(
    bead: Bead, title: str, body: str, meta: dict
) -> None:
    data = bead.to_dict()
    data.update(title=title, body=body, meta=meta)
    written = dump_data(data)
    fast = directyaml.load(written.decode())
    event("direct" if fast is not None else "ruamel")
    if directyaml.dump(data) is not None:
        assert fast is not None  # whatever the direct writer writes, the direct reader reads
    if fast is not None:
        assert fast == ruamel_load(written.decode())
        assert [type(v) for v in fast.values()] == [type(v) for v in data.values()]


@given(beads())
def test_a_bead_file_is_read_by_the_direct_reader(bead: Bead) -> None:
    written = dump_bead(bead).decode()
    fast = directyaml.load(written)
    if directyaml.dump(bead.to_dict()) is not None:
        assert fast is not None and Bead.from_dict(fast) == bead
    assert load_bead(written) == bead


def agrees_or_declines(text: str) -> None:
    """The direct reader either declines `text` or reads what ruamel reads; it never accepts
    what ruamel refuses."""
    fast = directyaml.load(text)
    event("direct" if fast is not None else "declined")
    if fast is None:
        return
    assert fast == ruamel_load(text)
    assert directyaml.dump(fast) == text.encode()  # what it accepts, the writer writes


MUTATION = st.sampled_from(
    ["", " ", "  ", "\n", ":", ": ", "- ", "'", "''", "|", "|-", "|2", "&a ", "*a", "#", "{}",
     "[]", "null", "~", "1.5", "0x1", "true", "yes", "\t", "key: v\n", "  k: v\n", "- x\n"]
)  # fmt: skip


@given(beads(), st.integers(0, 10_000), st.integers(0, 3), MUTATION)
def test_mutated_bead_files_are_declined_or_read_as_ruamel_reads_them(
    bead: Bead, where: int, cut: int, insert: str
) -> None:
    text = dump_bead(bead).decode()
    at = where % (len(text) + 1)
    agrees_or_declines(text[:at] + insert + text[at + cut :])


@given(st.text(st.sampled_from("ab:- '|\n#&*{}[]2\t1"), max_size=40))
def test_arbitrary_text_is_declined_or_read_as_ruamel_reads_it(text: str) -> None:
    try:
        ruamel_load(text)
    except Exception:
        assert directyaml.load(text) is None  # ruamel refuses it: never accepted here
        return
    agrees_or_declines(text)


def test_hostile_text_is_left_to_ruamels_checks() -> None:
    import pytest

    from beads.errors import InvalidInput

    for text in ("a: &x 1\nb: *x\n", "a: !!python/object 1\n", "a:\n" + "  a:\n" * 80 + "  b: 1\n"):
        assert directyaml.load(text) is None
    with pytest.raises(InvalidInput, match="anchor or alias"):
        codec.load_data("a: &x [1]\nb: *x\n")
    deep = "".join(f"{'  ' * i}k:\n" for i in range(100)) + "  " * 100 + "k: 1\n"
    assert directyaml.load(deep) is None  # past MAX_DEPTH: ruamel's checks decide
    with pytest.raises(InvalidInput, match="deeper"):
        codec.load_data("x: " + "[" * 70 + "]" * 70 + "\n")


def test_reading_a_plain_bead_never_imports_ruamel() -> None:
    stamp = "2026-01-01T00:00:00.000000Z"
    bead = Bead(id="gc-abcdefgh", type="task", title="t", sender="mayor", body="a\nb\n",
                created_at=stamp, updated_at=stamp)  # fmt: skip
    code = (
        "import sys\n"
        "from beads.codec import load_bead\n"
        "load_bead(sys.stdin.buffer.read())\n"
        "print(sorted(m for m in sys.modules if m.startswith(('ruamel', '_ruamel'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], input=dump_bead(bead), capture_output=True,
                         check=True).stdout  # fmt: skip
    assert out.decode().strip() == "[]"
