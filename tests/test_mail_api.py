"""The mail policy a Python caller gets: the same as `gc mail send` (mail/api.py)."""

from __future__ import annotations

import pytest

from beads.errors import InvalidInput
from beads.store import Store
from mail import api
from mail.beadmail import BeadMail
from mail.execmail import ExecMail
from mail.fake import FakeProvider
from mail.provider import ARCHIVED, DIRECTORY, PRIORITY


@pytest.fixture
def town(store: Store) -> BeadMail:
    mail = BeadMail(store)
    for name in ("dog", "cat"):
        mail.send("mayor", name, "hello", "")
    return mail


def test_unknown_recipient_warns_as_data(town: BeadMail) -> None:
    sent, warnings = api.send(town, "mayor", ["dgo"], "", "hi")
    assert [m.to for m in sent] == ["dgo"]
    assert warnings == ['unknown recipient "dgo" (did you mean dog?)']


def test_strict_recipients_refuse_a_python_callers_send(town: BeadMail) -> None:
    store = town.store
    with store.batch() as batch:
        batch.set_config({**store.config, "mail": {"strict_recipients": True}})
    before = store.count(type="message")
    with pytest.raises(InvalidInput, match='unknown recipient "cta".*strict_recipients'):
        api.send(town, "mayor", ["dog"], "", "hi", cc=["cta"])
    assert store.count(type="message") == before  # nothing sent, not even to dog
    assert api.send(town, "mayor", ["dog"], "", "hi").warnings == []


def test_to_all_reaches_every_known_agent_but_the_sender(town: BeadMail) -> None:
    sent, _ = api.send(town, "mayor", [], "", "standup", to_all=True)
    assert sorted(m.to for m in sent) == ["cat", "dog"]
    with pytest.raises(InvalidInput, match="cannot be combined"):
        api.send(town, "mayor", ["dog"], "", "x", to_all=True)
    with pytest.raises(InvalidInput, match="nothing to send"):
        api.send(town, "mayor", ["dog"], "", "")


def test_providers_declare_what_they_support(town: BeadMail) -> None:
    assert town.capabilities == {PRIORITY, ARCHIVED, DIRECTORY}
    exec_mail = ExecMail("/bin/true")
    assert exec_mail.capabilities == frozenset()
    with pytest.raises(InvalidInput, match="archived mail needs the beadmail provider"):
        exec_mail.archived("dog")
    with pytest.raises(InvalidInput, match="--all needs a provider that knows the agents"):
        api.send(FakeProvider(), "mayor", [], "", "x", to_all=True)
    # A provider that knows no agents passes any non-empty recipient on, without warnings
    # (as gc does with an exec script: the script decides).
    assert api.send(FakeProvider(), "mayor", ["anyone"], "", "x").warnings == []
    assert api.send(FakeProvider(), "mayor", ["any one@x"], "", "x").messages[0].to == "any one@x"
    with pytest.raises(InvalidInput, match="recipient is empty"):
        api.send(FakeProvider(), "mayor", [" "], "", "x")
