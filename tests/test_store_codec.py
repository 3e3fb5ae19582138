"""The YAML codec: canonical files and load(dump(b)) == b for every valid bead; the canonical
writer (`beads.records.yamlwrite`) against the bytes gc wrote before, and its reader."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from beads.errors import InvalidInput
from beads.records import codec, yamlread, yamlwrite
from beads.records.codec import dump_bead, dump_data, load_bead
from beads.records.record import FIELD_ORDER, Bead
from beads.store import Store
from tests.conftest import copy_store


def examples(count: int) -> settings:
    """`count` examples a property on a developer's run; a thorough profile (the `ci` one,
    which .ci/run selects) keeps its own, larger number. These properties draw whole beads
    and documents, most of their time is spent drawing them, and the thorough run is where
    many examples pay."""
    if settings().max_examples > settings.get_profile("default").max_examples:
        return settings()
    return settings(max_examples=count)


# Drawing a bead or a document costs ~10-20 ms: a developer's run tries this many of each.
DRAWN = examples(25)


LOWER = "abcdefghijklmnopqrstuvwxyz"
LETTERS = LOWER + LOWER.upper()
DIGITS = "0123456789"
ALNUM = LETTERS + DIGITS


def word(*parts: tuple[str, int, int]) -> st.SearchStrategy[str]:
    """Text of `(alphabet, least, most)` parts in turn: what `st.from_regex` draws for the
    pattern `[alphabet]{least,most}...`, each part drawn as one piece of text (from_regex
    draws each character of a repeat on its own, several times the work)."""
    pieces = [st.text(alphabet, min_size=least, max_size=most) for alphabet, least, most in parts]
    return st.tuples(*pieces).map("".join)


# The patterns, in order: [A-Za-z0-9][A-Za-z0-9._-]{0,20} (but "all"),
# [a-z][a-z0-9]{0,5}-[a-z2-7]{8}, [a-z][a-z0-9_-]{0,10} and [A-Za-z0-9][A-Za-z0-9._:/=-]{0,12}.
AGENT = word((ALNUM, 1, 1), (ALNUM + "._-", 0, 20)).filter(lambda a: a != "all")
ID = word((LOWER, 1, 1), (LOWER + DIGITS, 0, 5), ("-", 1, 1), (LOWER + "234567", 8, 8))
TYPE = word((LOWER, 1, 1), (LOWER + DIGITS + "_-", 0, 10))
LABEL = word((ALNUM, 1, 1), (ALNUM + "._:/=-", 0, 12))
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
META_KEY = word((LETTERS + "_", 1, 1), (ALNUM + "_.-", 0, 10))  # [A-Za-z_][A-Za-z0-9_.-]{0,10}
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
        type=draw(TYPE),
        title=draw(LINE.map(lambda t: t[:500])),
        body=draw(TEXT),
        sender=draw(AGENT),
        status="closed" if closed else "open",
        assignee=draw(st.none() | AGENT),
        cc=draw(st.lists(AGENT, max_size=3, unique=True)),
        labels=draw(st.lists(LABEL, max_size=3, unique=True)),
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


@DRAWN
@given(beads())
def test_load_of_dump_is_the_same_bead(bead: Bead) -> None:
    bead.validate()
    assert load_bead(dump_bead(bead)) == bead


@DRAWN
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


# -- the canonical bytes: what gc wrote before, for every value it could write ---------------
#
# Before the writer wrote every value itself, gc's files were libyaml's (ruamel's C emitter's)
# bytes. tests/data/canonical/ruamel-c.json holds samples of them, frozen from that emitter:
# [value, file text] pairs over text on every edge of its choices (plain, quoted, escaped,
# `|` blocks, folded lines, `? key` entries), numbers, nested lists and mappings. Where the
# C emitter is installed, hypothesis compares the writer with it too.

SAMPLES = Path(__file__).parent / "data" / "canonical" / "ruamel-c.json"
EXAMPLE = Path(__file__).parent.parent / ".beads-example"
HAS_CLIB = importlib.util.find_spec("_ruamel_yaml") is not None


def libyaml_dump(data: dict[str, Any]) -> bytes:
    """`data` as gc wrote it before: ruamel's C emitter, configured as gc configured it."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=False)
    assert "CEmitter" in yaml.Emitter.__name__
    yaml.default_flow_style = False
    yaml.allow_unicode = True
    yaml.width = 4096
    yaml.representer.sort_base_mapping_type_on_output = False
    yaml.representer.add_representer(
        str,
        lambda rep, text: rep.represent_scalar(
            "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
        ),
    )
    yaml.representer.ignore_aliases = lambda data: True
    out = __import__("io").StringIO()
    yaml.dump(data, out)
    return out.getvalue().encode("utf-8")


needs_clib = pytest.mark.skipif(not HAS_CLIB, reason="ruamel.yaml.clib (libyaml) not installed")


def libyaml_wrote_it(value: Any) -> bool:
    """Whether the writer writes `value` as libyaml did: everything but multi-line text
    holding U+2028 or U+2029, which libyaml put in a `|` block that ruamel's pure Python
    reader cannot read back (the writer double-quotes it)."""
    if isinstance(value, str):
        return "\n" not in value or ("\u2028" not in value and "\u2029" not in value)
    if isinstance(value, dict):
        return all(libyaml_wrote_it(k) and libyaml_wrote_it(v) for k, v in value.items())
    if isinstance(value, list):
        return all(libyaml_wrote_it(item) for item in value)
    return True


def frozen_samples() -> list[tuple[dict, str]]:
    """The frozen samples the writer writes as libyaml did."""
    samples = [(data, text) for data, text in json.loads(SAMPLES.read_text())]
    kept = [(data, text) for data, text in samples if libyaml_wrote_it(data)]
    assert len(samples) >= 400 and len(kept) >= 360
    return kept


def test_the_writer_writes_the_frozen_bytes_of_the_previous_writer() -> None:
    for data, text in frozen_samples():
        assert yamlwrite.dump(data) == text.encode("utf-8"), data


def test_multi_line_text_with_unicode_line_separators_is_double_quoted() -> None:
    # libyaml's `|` block of such text is not read back by ruamel's pure Python reader.
    data = {"body": "a\u2028b\nc\n", "k": ["\u2029\n"]}
    written = dump_data(data)
    assert written == b'body: "a\\Lb\\nc\\n"\nk:\n- "\\P\\n"\n'
    from ruamel.yaml import YAML

    for pure in (False, True):
        assert YAML(typ="safe", pure=pure).load(written) == data
    assert codec.load_data(written) == data


def test_every_example_bead_is_written_as_it_is_stored() -> None:
    files = sorted(EXAMPLE.rglob("*.yaml"))
    assert len(files) >= 7  # config.yaml and a bead of each type
    for path in files:
        raw = path.read_bytes()
        data = yamlread.load(raw.decode())
        assert data is not None, path  # the direct reader reads every stored file
        assert dump_data(data) == raw, path
        if path.name != "config.yaml":
            assert dump_bead(Bead.from_dict(data)) == raw


# Text that sits on every edge of the choice between plain, single-, double-quoted and `|`.
# fmt: off
EDGY = st.sampled_from(
    [
        "", " ", "  ", "a ", " a", "a  b", "'", "''", "it's", 'a"b', "a\tb", "a\x85b", "\u2028",
        "\u2029", "a\u2028b", "a\u2029 b", "a\ufeffb", "\xa0", "\xa0x", "x\xa0", "\ufffd", "\ufffe",
        "\U0001f600", "-", "--", "---", "---x", "...", "..", ".. x", "-a", "- a", "-- x", "?",
        "?x", "? x", ":", ":a", "x:", "x: ", "a:b", "a: b", "a#b", "a #b", "#a", "a -", "a ?",
        "1:20", "@x", "%x", "!x", "&x", "*x", "|x", ">x", "[x", "x]", "{x", "x}", "x,y", "x, y",
        "`x", "=", "<<", "~", "null", "Null", "NULL", "nULL", "true", "True", "FALSE", "fAlse",
        "yes", "no", "on", "off", "y", "n", "123", "-3", "+1", "1.5", "-.5", ".5", "1e3", "1_000",
        "0x1f", "0o7", "0b1", ".inf", "-.inf", ".nan", ".NaN", "NaN", "2026-01-01",
        "2026-01-31T12:00:00.000000Z", "2026-01-31 12:00:00", "é", "a\\b", "\x00", "\x07\x1b",
        "\r", "x\r\ny", "\x7f", "\x9f", "\n", "\n\n", "x\n", "x\n\n", "x\n\n\n", " x\n", "\nx",
        "x \ny", "x\n y", "x\ny ", "x\ty\n", "a\u2028b\n", "a\nb\u2028", "a\n\u2028b\n",
        "\u2028\n", "\ud7ff\ue000", "a" * 999, "a" * 1001, "x\t", "\tx",
    ]
)
# fmt: on
CHARS = st.sampled_from(list(" -:#?'\"ab1.,[]{}!&*|>%@`\xa0\t\n\r\u2028\u2029\x85\U0001f600é\\"))
# Lines longer than the folding column (4096): a short pattern repeated, so a space falls on
# every column near it.
LONG = st.builds(
    lambda pattern, times, end: (pattern * times)[:9000] + end,
    st.text(st.sampled_from("ab '\"\t\u2028é"), min_size=2, max_size=12),
    st.integers(350, 2500),
    st.sampled_from(["", " ", "\n", "x"]),
)
ANY_TEXT = (
    EDGY
    | st.text(CHARS, max_size=12)
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
    | LONG
)
ANY_SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT
)
ANY_KEY = META_KEY | EDGY | st.text(CHARS, max_size=6) | st.text("kéx\n", min_size=60, max_size=140)
ANY_DATA = st.dictionaries(
    ANY_KEY,
    st.recursive(
        ANY_SCALAR,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_KEY, inner, max_size=3),
        max_leaves=8,
    ),
    max_size=5,
)


@needs_clib
@DRAWN
@given(ANY_DATA)
def test_the_writer_writes_what_libyaml_wrote(data: dict) -> None:
    assume(libyaml_wrote_it(data))
    assert yamlwrite.dump(data) == libyaml_dump(data)


@needs_clib
@DRAWN
@given(beads(), ANY_TEXT, ANY_TEXT, ANY_DATA)
def test_a_bead_of_any_text_is_written_as_libyaml_wrote_it(
    bead: Bead, body: str, reason: str, meta: dict
) -> None:
    data = bead.to_dict()
    data.update(body=body, close_reason=reason, meta=meta)
    assume(libyaml_wrote_it(data))
    assert yamlwrite.dump(data) == libyaml_dump(data)


@needs_clib
@DRAWN
@given(beads())
def test_dump_bead_is_libyamls_bytes(bead: Bead) -> None:
    assume(libyaml_wrote_it(bead.to_dict()))
    assert dump_bead(bead) == libyaml_dump(bead.to_dict())


# -- round trips: through the writer's own reader and through ruamel ------------------------


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (1 == 1.0 == True are not the same)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)  # -0.0 is not 0.0
    return a == b


@DRAWN
@given(ANY_DATA)
def test_what_the_writer_writes_its_reader_reads_back(data: dict) -> None:
    text = yamlwrite.dump_text(data)
    read = yamlread.load(text)
    if "\u2028" in text or "\u2029" in text:
        assert read is None  # documented: such text is left to ruamel
        event("left to ruamel")
    else:
        assert read is not None and same(read, data)
    assert same(codec.load_data(text.encode()), data)


@pytest.mark.parametrize("pure", [False, True], ids=["ruamel-c", "ruamel-pure"])
@DRAWN
@given(data=ANY_DATA)
def test_what_the_writer_writes_ruamel_reads_back(pure: bool, data: dict) -> None:
    from ruamel.yaml import YAML

    assert same(YAML(typ="safe", pure=pure).load(yamlwrite.dump(data)), data)


@DRAWN
@given(beads())
def test_a_bead_file_is_read_by_the_direct_reader(bead: Bead) -> None:
    written = dump_bead(bead).decode()
    read = yamlread.load(written)
    assert read is not None and Bead.from_dict(read) == bead
    assert load_bead(written) == bead


def test_shared_containers_are_written_in_full_never_as_aliases() -> None:
    # The store's reader refuses anchors and aliases: the writer never makes them.
    shared = ["a", "b"]
    empty: list = []
    data = {"meta": {"x": shared, "y": shared, "e": empty, "f": empty}}
    written = dump_data(data)
    assert b"&" not in written and b"*" not in written
    assert codec.load_data(written) == data


def test_a_value_yaml_cannot_hold_is_refused_not_written() -> None:
    with pytest.raises(TypeError):
        yamlwrite.dump({"a": object()})
    with pytest.raises(TypeError):
        yamlwrite.dump({1: "a"})


def test_the_plain_scalar_rules_are_ruamels_resolver() -> None:
    # Plain text is written only when it reads back as text: the writer's rules are those of
    # the resolver ruamel reads with (YAML 1.2 plus times, `<<`, `=`); same rules, same flags.
    from ruamel.yaml.resolver import Resolver

    theirs = {
        first: [(str(tag).rsplit(":", 1)[-1], rx.pattern, rx.flags) for tag, rx in rules]
        for first, rules in Resolver().yaml_implicit_resolvers.items()
    }
    ours = {
        first: [(tag, rx.pattern, rx.flags) for tag, rx in zip(
            [rule[0] for rule in rules], yamlwrite.implicit(first), strict=True)]
        for first, rules in yamlwrite.IMPLICIT_RULES.items()
    }  # fmt: skip
    assert ours == theirs


@given(st.text(alphabet="0123456789abcdefxoXOBeEtTzZ_.:+- \tgq", max_size=25), st.integers(0, 9))
def test_the_digit_shortcut_agrees_with_the_resolver_rules(rest: str, digit: int) -> None:
    # Text starting with a digit skips the number and time rules when it has a letter none
    # of them allows: it must decide as the rules would.
    text = f"{digit}{rest}"
    if text[-1] == " " or ": " in text or " #" in text or text[-1] == ":":
        return
    by_rules = not any(rule.match(text) for rule in yamlwrite.implicit(text[0]))
    assert yamlwrite.plain_allowed(text) == by_rules


# -- the writer never needs ruamel: its bytes cannot depend on what is installed ------------

_NO_RUAMEL = (
    "import sys\n"
    "class Refuse:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in ('ruamel', '_ruamel_yaml'):\n"
    "            raise ImportError('ruamel is not installed here')\n"
    "sys.meta_path.insert(0, Refuse())\n"
)


def test_the_writer_writes_the_same_bytes_without_ruamel_installed(tmp_path: Path) -> None:
    # Every frozen sample (floats, control characters, folded lines, `? key` entries) in a
    # process where ruamel cannot be imported at all, C extension or not.
    samples = tmp_path / "samples.json"
    samples.write_text(json.dumps(frozen_samples()))
    code = _NO_RUAMEL + (
        "import json\n"
        "from beads.records.codec import dump_data, load_data\n"
        "bad = 0\n"
        "for data, text in json.load(open(sys.argv[1])):\n"
        "    bad += dump_data(data) != text.encode()\n"
        "    if '\\u2028' not in text and '\\u2029' not in text:\n"
        "        bad += load_data(text) != data\n"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(samples)], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert out.strip() == "0"


def test_writing_a_plain_bead_never_imports_ruamel(tmp_path: Path, store_template: Path) -> None:
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
    copy_store(store_template, tmp_path / ".beads")  # a new store (a copy of an init)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert out.strip() == "[]"
    with Store.open(tmp_path) as store:  # and the file is the canonical one
        message = store.list(type="message")[0]
        assert store.view.read(store.index.location(message.id)[0]) == dump_bead(message)


def test_a_bead_of_floats_control_characters_and_long_lines_is_written_without_ruamel(
    tmp_path: Path, store_template: Path
) -> None:
    # What the writer once left to ruamel's emitter: it writes it itself, and reads it back.
    code = _NO_RUAMEL + (
        "from beads.store import Store\n"
        "with Store.open(sys.argv[1], agent='dog') as store:\n"
        "    bead = store.create('task', 'tabs\\there', 'x ' * 3000 + '\\x07 trailing \\n',\n"
        "                        meta={'ratio': 0.25, 'big': 1e300, 'emoji': '\\U0001f600',\n"
        "                              'nested': [[1.5, {'k': 'a\\u2028b'}], []]})\n"
        "    print(bead.id)\n"
    )
    copy_store(store_template, tmp_path / ".beads")  # a new store (a copy of an init)
    bead_id = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                             text=True, check=True).stdout.strip()  # fmt: skip
    with Store.open(tmp_path) as store:
        bead = store.get(bead_id)
        raw = store.view.read(store.index.location(bead_id)[0])
    assert bead.meta["ratio"] == 0.25 and bead.body.startswith("x x")
    assert raw == dump_bead(bead) and load_bead(raw) == bead
    if HAS_CLIB:
        assert raw == libyaml_dump(bead.to_dict())


# -- the direct reader reads canonical text only; anything else is ruamel's -----------------


def ruamel_load(text: str) -> object:
    return codec._yaml().load(text)


def agrees_or_declines(text: str) -> None:
    """The direct reader either declines `text` or reads what ruamel reads; it never accepts
    what ruamel refuses, and what it accepts is what the writer writes."""
    fast = yamlread.load(text)
    event("direct" if fast is not None else "declined")
    if fast is None:
        return
    assert same(fast, ruamel_load(text))
    assert yamlwrite.dump_text(fast) == text


@DRAWN
@given(beads(), ANY_TEXT, ANY_DATA)
def test_the_direct_reader_reads_what_ruamel_reads(bead: Bead, body: str, meta: dict) -> None:
    data = bead.to_dict()
    data.update(body=body, meta=meta)
    agrees_or_declines(yamlwrite.dump_text(data))


MUTATION = st.sampled_from(
    ["", " ", "  ", "\n", ":", ": ", "- ", "'", "''", "|", "|-", "|+", "|2", "&a ", "*a", "#",
     "{}", "[]", "null", "~", "1.5", "1e3", "0x1", "true", "yes", "\t", "key: v\n", "  k: v\n",
     "- x\n", "? ", '"', "\\", '\\"', "\\x41"]
)  # fmt: skip


@DRAWN
@given(beads(), st.integers(0, 10_000), st.integers(0, 3), MUTATION)
def test_mutated_bead_files_are_declined_or_read_as_ruamel_reads_them(
    bead: Bead, where: int, cut: int, insert: str
) -> None:
    text = dump_bead(bead).decode()
    at = where % (len(text) + 1)
    agrees_or_declines(text[:at] + insert + text[at + cut :])


@DRAWN
@given(ANY_DATA, st.integers(0, 10_000), st.integers(0, 3), MUTATION)
def test_mutated_canonical_files_are_declined_or_read_as_ruamel_reads_them(
    data: dict, where: int, cut: int, insert: str
) -> None:
    text = yamlwrite.dump_text(data)
    at = where % (len(text) + 1)
    mutated = text[:at] + insert + text[at + cut :]
    try:
        ruamel_load(mutated)
    except Exception:
        assert yamlread.load(mutated) is None  # ruamel refuses it: never accepted here
        return
    agrees_or_declines(mutated)


@given(st.text(st.sampled_from("ab:- '|\n#&*{}[]2\t1?\"\\"), max_size=40))
def test_arbitrary_text_is_declined_or_read_as_ruamel_reads_it(text: str) -> None:
    try:
        ruamel_load(text)
    except Exception:
        assert yamlread.load(text) is None  # ruamel refuses it: never accepted here
        return
    agrees_or_declines(text)


def test_hostile_text_is_left_to_ruamels_checks() -> None:
    from beads.errors import InvalidInput

    for text in ("a: &x 1\nb: *x\n", "a: !!python/object 1\n", "a:\n" + "  a:\n" * 80 + "  b: 1\n"):
        assert yamlread.load(text) is None
    with pytest.raises(InvalidInput, match="anchor or alias"):
        codec.load_data("a: &x [1]\nb: *x\n")
    deep = "".join(f"{'  ' * i}k:\n" for i in range(100)) + "  " * 100 + "k: 1\n"
    assert yamlread.load(deep) is None  # past MAX_DEPTH: ruamel's checks decide
    with pytest.raises(InvalidInput, match="deeper"):
        codec.load_data("x: " + "[" * 70 + "]" * 70 + "\n")
    deep_lists = "".join(f"{'  ' * i}- \n" for i in range(100))
    assert yamlread.load("k:\n" + "- " * 100 + "1\n") is None
    assert yamlread.load("k:\n" + deep_lists) is None


def test_reading_a_plain_bead_never_imports_ruamel() -> None:
    stamp = "2026-01-01T00:00:00.000000Z"
    bead = Bead(id="gc-abcdefgh", type="task", title="t", sender="mayor", body="a\nb\n",
                created_at=stamp, updated_at=stamp,
                meta={"ratio": 0.5, "bell": "\x07"})  # fmt: skip
    code = (
        "import sys\n"
        "from beads.records.codec import load_bead\n"
        "load_bead(sys.stdin.buffer.read())\n"
        "print(sorted(m for m in sys.modules if m.startswith(('ruamel', '_ruamel'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], input=dump_bead(bead), capture_output=True,
                         check=True).stdout  # fmt: skip
    assert out.decode().strip() == "[]"


def test_two_reads_of_one_file_never_share_a_list_or_a_mapping() -> None:
    # The reader remembers entries it has checked; what it returns is each caller's own.
    text = dump_bead(
        Bead(id="gc-abcdefgh", type="task", title="t", sender="mayor", labels=["a"],
             created_at="2026-01-01T00:00:00.000000Z", updated_at="2026-01-01T00:00:00.000000Z",
             meta={"read": True})
    ).decode()  # fmt: skip
    first = yamlread.load(text)
    assert first is not None
    first["labels"].append("b")
    first["meta"]["read"] = False
    second = yamlread.load(text)
    assert second is not None and second["labels"] == ["a"] and second["meta"] == {"read": True}


def test_the_character_classes_hold_exactly_the_characters_outside_their_printable_ranges() -> None:
    # The writer's classes are written as what they exclude (they compile quickly so): over
    # every code point, each matches exactly what the class of its printable ranges does not.
    # `subn` compares the text left and the number of matches (each one character, as every
    # code point appears once), without a list of a million one-character matches. The
    # reference class removes whole runs (`+`): the same text left, in a few thousand matches;
    # matching one character at a time, it would match once per character it removed.
    import re

    every = "".join(map(chr, range(0x110000)))
    printable = "\x20-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd"
    one_line = "\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd"
    for ours, negated_runs in [
        (yamlwrite._SPECIAL, f"[^\n{printable}]+"),
        (yamlwrite._NOT_ONE_LINE, f"[^{one_line}]+"),
        (yamlwrite._TO_ESCAPE, f'[^{one_line}]+|["\\\\]'),
    ]:
        left = re.sub(negated_runs, "", every)
        assert ours.full.subn("", every) == (left, len(every) - len(left)), negated_runs


def test_the_ascii_twins_of_the_character_classes_match_what_the_full_classes_match() -> None:
    # A class's twin serves ASCII text (the full class compiles slowly): over every string of
    # ASCII characters they must find the same.
    every_ascii = "".join(map(chr, range(0x80)))
    for ours in (yamlwrite._SPECIAL, yamlwrite._NOT_ONE_LINE, yamlwrite._TO_ESCAPE):
        assert ours.ascii.findall(every_ascii) == ours.full.findall(every_ascii)
        assert ours.findall(every_ascii + "\u2028") == ours.full.findall(every_ascii + "\u2028")


def test_writing_ascii_text_never_compiles_the_full_character_classes() -> None:
    script = (
        "from beads.records import yamlwrite as w\n"
        "text = w.dump_text({'title': 'tab\\there', 'body': 'a\\nb', 'q': '\"x\" \\\\'})\n"
        "assert '\"tab\\\\there\"' in text, text\n"
        "print(sorted(n for n in ('_SPECIAL', '_NOT_ONE_LINE', '_TO_ESCAPE')\n"
        "             if getattr(w, n).compiled()))\n"
        "w.dump({'title': 'caf\\u00e9\\x85'})\n"
        "print(w._NOT_ONE_LINE.compiled())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.split("\n")[:2] == ["[]", "True"]


def test_a_duplicate_key_is_named_without_advice_that_does_not_apply() -> None:
    # ruamel ends its refusal with how to switch the check off in ruamel's own API: nothing a
    # person reading gc's one line (a remote's config.yaml, a bead edited by hand) can do.
    with pytest.raises(InvalidInput) as refused:
        codec.load_data(b"format: 1\nmail:\n  provider: beadmail\n  provider: exec:/x\n",
                        what="config.yaml")  # fmt: skip
    message = refused.value.message
    assert 'duplicate key "provider"' in message and "line 4" in message
    assert "suppress" not in message and "http" not in message
