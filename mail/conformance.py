"""The mail conformance suite: plain Python, runnable against any provider.

pytest runs it against the fake, beadmail and an exec script (tests/); `gc mail conformance
PROGRAM` runs it against a user's exec script. Each case uses recipient names of its own,
made from a unique prefix, because it sends and archives on whatever backend it is given.
The core cases check what Gas City's own suite checks (`internal/mail/mailtest`), so a script
that passes gc's suite passes them; the extra cases (`EXTRAS`: read flags, the `all` op,
multi-line bodies, thread order, cc, priority) run with `strict`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from mail.message import AlreadyArchived, Message, MessageNotFound, ProviderError, TimedOut
from mail.provider import PRIORITY, Provider


class CaseFailed(AssertionError):
    """A conformance expectation did not hold."""


def expect(condition: object, what: str) -> None:
    if not condition:
        raise CaseFailed(what)


def expect_raises(
    error: type[Exception] | tuple[type[Exception], ...], call: Callable[[], object], what: str
) -> None:
    try:
        call()
    except error:
        return
    except Exception as exc:  # the wrong error is a failure, with its name
        raise CaseFailed(f"{what}: raised {type(exc).__name__}: {exc}") from None
    raise CaseFailed(f"{what}: nothing was raised")


@dataclass
class Names:
    """Agent names private to one case: `<prefix>-<case>-a`, ..."""

    prefix: str

    def __call__(self, who: str) -> str:
        return f"{self.prefix}-{who}"

    @property
    def unknown_id(self) -> str:
        return f"{self.prefix}-no-such-message"


Case = Callable[[Provider, Names], None]
CASES: dict[str, Case] = {}
EXTRAS: set[str] = set()  # beyond gc's suite: run with `strict`


def case(func: Case) -> Case:
    CASES[func.__name__.removeprefix("case_")] = func
    return func


def extra(func: Case) -> Case:
    EXTRAS.add(func.__name__.removeprefix("case_"))
    return case(func)


def _ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


@case
def case_send_returns_matching_fields(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "Subject line", "Body text")
    expect(sent.id, "send returns an id")
    expect((sent.sender, sent.to) == (n("a"), n("b")), f"from/to match: {sent.sender}, {sent.to}")
    expect(sent.subject == "Subject line", f"subject matches: {sent.subject!r}")
    expect(sent.body == "Body text", f"body matches: {sent.body!r}")
    created = datetime.fromisoformat(sent.created_at.replace("Z", "+00:00"))
    age = abs((datetime.now(UTC) - created).total_seconds())
    expect(age < 300, f"created_at is recent: {sent.created_at}")


@extra
def case_multi_line_bodies_and_read_flags(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "Subject line", "Body text\nwith two lines")
    expect(sent.body == "Body text\nwith two lines", f"the body keeps its lines: {sent.body!r}")
    expect(sent.read is False, "a new message is unread")
    expect(p.check(n("b"))[0].read is False, "check lists it unread")
    expect(p.get(sent.id).read is False, "get shows it unread")
    expect(p.read(sent.id).read is True, "read returns it marked read")
    expect(p.get(sent.id).read is True, "it stays read")
    p.mark_unread(sent.id)
    expect(p.get(sent.id).read is False, "mark-unread clears the flag")


@case
def case_send_gives_unique_ids(p: Provider, n: Names) -> None:
    ids = {p.send(n("a"), n("b"), f"s{i}", "x").id for i in range(3)}
    expect(len(ids) == 3, f"three sends, three ids: {ids}")


@case
def case_inbox_is_empty_at_first(p: Provider, n: Names) -> None:
    expect(p.inbox(n("nobody")) == [], "a fresh recipient has an empty inbox")


@case
def case_inbox_holds_only_the_recipients_mail(p: Provider, n: Names) -> None:
    mine = p.send(n("a"), n("b"), "for b", "x")
    p.send(n("a"), n("c"), "for c", "x")
    expect(_ids(p.inbox(n("b"))) == [mine.id], "b's inbox holds b's message only")


@case
def case_inbox_excludes_read_mail(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "s", "x")
    p.read(sent.id)
    expect(p.inbox(n("b")) == [], "read mail leaves the inbox")


@case
def case_check_returns_unread_without_marking_read(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "s", "x")
    expect(_ids(p.check(n("b"))) == [sent.id], "check lists the unread message")
    expect(_ids(p.check(n("b"))) == [sent.id], "check again: still there")
    expect(_ids(p.inbox(n("b"))) == [sent.id], "inbox still has it")


@case
def case_read_returns_marks_read_and_keeps_it(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "s", "body")
    got = p.read(sent.id)
    expect((got.id, got.body) == (sent.id, "body"), "read returns the message")
    expect(p.inbox(n("b")) == [], "it leaves the inbox")
    expect(p.get(sent.id).body == "body", "and stays accessible")


@case
def case_get_does_not_mark_read(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "s", "x")
    expect(p.get(sent.id).id == sent.id, "get returns the message")
    expect(_ids(p.inbox(n("b"))) == [sent.id], "get leaves it unread")


@case
def case_unknown_ids_fail(p: Provider, n: Names) -> None:
    # Gas City maps only `gc-mail-error:not-found` to not-found; any clear error will do.
    for name, call in (("read", p.read), ("get", p.get), ("archive", p.archive)):
        expect_raises(
            (MessageNotFound, ProviderError),
            lambda c=call: c(n.unknown_id),
            f"{name} of an unknown id",
        )


@case
def case_mark_read_and_unread_toggle_the_inbox(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "s", "x")
    p.mark_read(sent.id)
    expect(p.inbox(n("b")) == [], "mark-read takes it out of the inbox")
    p.mark_unread(sent.id)
    expect(_ids(p.inbox(n("b"))) == [sent.id], "mark-unread puts it back")


@case
def case_reply_keeps_the_thread_and_goes_to_the_sender(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "Question", "?")
    answer = p.reply(sent.id, n("b"), "", "!")
    expect(answer.to == n("a"), f"the reply goes to the original sender, not {answer.to}")
    expect(answer.reply_to == sent.id, f"reply_to is the original: {answer.reply_to}")
    expect(answer.thread_id == sent.thread_id, "the reply keeps the thread")


@extra
def case_reply_reaches_the_senders_inbox(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "Question", "?")
    answer = p.reply(sent.id, n("b"), "", "!")
    expect(_ids(p.inbox(n("a"))) == [answer.id], "the sender finds the reply in the inbox")


@case
def case_thread_returns_send_and_reply(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "Topic", "first")
    p.reply(sent.id, n("b"), "Re: Topic", "second")
    thread = p.thread(sent.thread_id or sent.id)
    expect(len(thread) == 2, f"the thread holds both: {_ids(thread)}")
    expect(p.thread(n.unknown_id) == [], "an unknown thread is empty")


@extra
def case_thread_is_in_order(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "Topic", "first")
    time.sleep(0.01)
    answer = p.reply(sent.id, n("b"), "Re: Topic", "second")
    thread = p.thread(answer.thread_id or sent.id)
    expect(_ids(thread) == [sent.id, answer.id], f"thread in order: {_ids(thread)}")


@case
def case_count_gives_total_and_unread(p: Provider, n: Names) -> None:
    first = p.send(n("a"), n("b"), "1", "x")
    p.send(n("a"), n("b"), "2", "x")
    p.read(first.id)
    counts = p.count(n("b"))
    expect((counts.total, counts.unread) == (2, 1), f"count is 2 total, 1 unread: {counts}")


@case
def case_count_of_an_empty_mailbox_is_zero(p: Provider, n: Names) -> None:
    counts = p.count(n("nobody"))
    expect((counts.total, counts.unread) == (0, 0), f"an empty mailbox counts 0, 0: {counts}")


@case
def case_delete_and_archive_remove_from_the_inbox(p: Provider, n: Names) -> None:
    kept = p.send(n("a"), n("b"), "keep", "x")
    archived = p.send(n("a"), n("b"), "archive", "x")
    deleted = p.send(n("a"), n("b"), "delete", "x")
    p.archive(archived.id)
    p.delete(deleted.id)
    expect(_ids(p.inbox(n("b"))) == [kept.id], "archive and delete leave the inbox")


@extra
def case_all_leaves_out_archived_and_deleted(p: Provider, n: Names) -> None:
    kept = p.send(n("a"), n("b"), "keep", "x")
    p.archive(p.send(n("a"), n("b"), "archive", "x").id)
    p.delete(p.send(n("a"), n("b"), "delete", "x").id)
    expect(_ids(p.all(n("b"))) == [kept.id], "archive and delete leave the mailbox")


@case
def case_archiving_twice_raises_already_archived(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "s", "x")
    p.archive(sent.id)
    expect_raises(AlreadyArchived, lambda: p.archive(sent.id), "archiving twice")


@case
def case_lifecycle_send_inbox_read(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "s", "x")
    expect(_ids(p.inbox(n("b"))) == [sent.id], "in the inbox after send")
    p.read(sent.id)
    expect(p.inbox(n("b")) == [], "gone after read")


@case
def case_lifecycle_send_check_archive(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "s", "x")
    expect(_ids(p.check(n("b"))) == [sent.id], "check sees it")
    p.archive(sent.id)
    expect(p.inbox(n("b")) == [], "gone after archive")


@case
def case_lifecycle_read_unread_toggle(p: Provider, n: Names) -> None:
    sent = p.send(n("a"), n("b"), "s", "x")
    for _ in range(2):
        p.mark_read(sent.id)
        expect(p.inbox(n("b")) == [], "marked read: out of the inbox")
        p.mark_unread(sent.id)
        expect(_ids(p.inbox(n("b"))) == [sent.id], "marked unread: back")
    expect(_ids(p.inbox(n("b"))) == [sent.id], "unread at the end")


@extra
def case_cc_recipients_get_a_copy(p: Provider, n: Names) -> None:
    p.send(n("a"), n("b"), "hello both", "x", cc=[n("c")])
    expect([m.subject for m in p.inbox(n("b"))] == ["hello both"], "to gets it")
    expect([m.subject for m in p.inbox(n("c"))] == ["hello both"], "cc gets a copy")
    p.read(p.inbox(n("c"))[0].id)
    expect(len(p.inbox(n("b"))) == 1, "reading the cc copy leaves the to copy unread")


@extra
def case_inbox_orders_by_priority(p: Provider, n: Names) -> None:
    if PRIORITY not in p.capabilities:
        raise CaseSkipped("the exec protocol carries no priority on send")
    p.send(n("a"), n("b"), "low", "x", priority=4)
    p.send(n("a"), n("b"), "urgent", "x", priority=0)
    p.send(n("a"), n("b"), "normal", "x", priority=2)
    expect([m.subject for m in p.inbox(n("b"))] == ["urgent", "normal", "low"], "by priority")


@extra
def case_all_lists_read_and_unread(p: Provider, n: Names) -> None:
    first = p.send(n("a"), n("b"), "1", "x")
    second = p.send(n("a"), n("b"), "2", "x")
    p.read(first.id)
    expect(sorted(_ids(p.all(n("b")))) == sorted([first.id, second.id]), "all has both")


class CaseSkipped(Exception):
    """The provider cannot express what the case checks."""


@dataclass
class Result:
    name: str
    outcome: str  # passed, failed, skipped
    detail: str = ""
    extra: bool = False  # beyond Gas City's suite
    timed_out: bool = False  # the provider ran out of time: the cases after it are not run


def unique_prefix() -> str:
    """A recipient-name prefix unlikely to meet real mail: `gcconf-<random>`."""
    return "gcconf-" + os.urandom(4).hex()


def run_case(name: str, provider: Provider, prefix: str) -> Result:
    extra = name in EXTRAS
    try:
        CASES[name](provider, Names(f"{prefix}-{name.replace('_', '-')[:24]}"))
    except CaseSkipped as exc:
        return Result(name, "skipped", str(exc), extra)
    except CaseFailed as exc:
        return Result(name, "failed", str(exc), extra)
    except TimedOut as exc:
        return Result(name, "failed", f"{type(exc).__name__}: {exc}", extra, timed_out=True)
    except Exception as exc:  # a provider error is a failed case, reported, never fatal
        return Result(name, "failed", f"{type(exc).__name__}: {exc}", extra)
    return Result(name, "passed", "", extra)


def run(provider: Provider, prefix: str | None = None, *, strict: bool = False) -> list[Result]:
    """Run the core cases (Gas City's) against `provider`, and with `strict` the extras too,
    with names under `prefix` (made unique if None)."""
    prefix = prefix or unique_prefix()
    names = [name for name in CASES if strict or name not in EXTRAS]
    results: list[Result] = []
    hung = None  # the case in which the provider ran out of time
    for name in names:
        if hung:
            # A program that hung once would hang again: each case would cost a time-out.
            said = f"not run: the program timed out in {hung}"
            results.append(Result(name, "skipped", said, name in EXTRAS))
            continue
        results.append(run_case(name, provider, prefix))
        hung = name if results[-1].timed_out else None
    return results
