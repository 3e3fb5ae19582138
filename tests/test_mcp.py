"""`gc mcp`: its server driven by the MCP SDK's own client, over stdio or in this process.

Over stdio, against the real `gc mcp` process started as a session starts it (its identity
from $GC_AGENT): the tests whose subject is the process or the wire. The mail tools end to
end, compared with the CLI (the stdio framing, the program's start-up and identity: the
recipient's server; the sender's is served in this process); a server killed mid-write; two
servers and the CLI writing at once, each a process of its own; requests piped with stdin
closed at once after them; a client that stops reading, or closes stdout and keeps stdin
open; stdout closed from the start. The one-line refusals without a store or without the
extra, and `gc mcp install`, run the command through the program's entry point (the `gc`
fixture).

In this process, through the SDK's in-memory connection (`Client(server)`) to the server `gc
mcp` builds (`build_server` over an `AgentStore` opened as `gc mcp --beads-dir --agent` opens
it): the tests whose subject is what the tools do. The work-thread tools; delivery items,
decisions and resources; bad arguments; a wait the client cancels; an index rebuilt and a
directory removed between two calls; a write after a server was killed. Every server process
pays the SDK's import at start-up, far more CPU than any of these tests' calls.

The SDK is imported by the tests that use it, never while collecting: every pytest worker
collects this module, and most run none of its tests.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager, redirect_stderr
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest

from beads.branch import branch_head
from beads.store import Store
from tests.conftest import GcRunner, gc_program, git, gone
from tests.test_sync import copy_template, named, pair_template  # noqa: F401 - a fixture

if TYPE_CHECKING:
    from mcp import Client, StdioServerParameters

if importlib.util.find_spec("mcp") is None:  # finds the SDK without importing it
    pytest.skip("gc mcp needs the mcp extra: pip install 'gc-beads[mcp]'", allow_module_level=True)

DEADLINE = 60.0  # seconds any one call may take before the test fails (never a timing check)


@pytest.fixture
def project(gc_store: GcRunner) -> Path:
    """A project with a store, made by `gc init`."""
    return gc_store.cwd


@pytest.fixture
def pair(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[GcRunner, GcRunner]:
    """Machine a (made with `gc init`, pushed) and machine b (cloned), one bare remote."""
    copy_template(request.getfixturevalue("pair_template"), tmp_path)
    return GcRunner(tmp_path / "a"), GcRunner(tmp_path / "b")


def params(project: Path, agent: str | None, *extra: str) -> StdioServerParameters:
    """`gc mcp` in `project`, its identity from the environment as a session's would be."""
    from mcp import StdioServerParameters

    # The SDK adds only HOME, PATH and a few more: the session's data folder is passed on.
    env = {"XDG_DATA_HOME": os.environ["XDG_DATA_HOME"], **({"GC_AGENT": agent} if agent else {})}
    return StdioServerParameters(
        command=gc_program(), args=["mcp", *extra], env=env, cwd=str(project)
    )


@asynccontextmanager
async def served(project: Path, agent: str | None = "mayor", *extra: str) -> AsyncIterator[Client]:
    """A connected client of a fresh `gc mcp` server, its stderr this process's. (Named here:
    the SDK's default is the `sys.stderr` of when it was imported, which a test may have
    replaced then.)"""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    transport = stdio_client(params(project, agent, *extra), errlog=sys.stderr)
    async with Client(transport, read_timeout_seconds=DEADLINE) as client:
        yield client


@asynccontextmanager
async def in_process(project: Path, agent: str) -> AsyncIterator[Client]:
    """A connected client of the server `gc mcp --agent <agent>` serves in `project`, built
    and served in this process; its store is closed when the client is."""
    from mcp import Client

    from mcpserver.agentstore import AgentStore
    from mcpserver.server import build_server

    agent_store = AgentStore(str(project / ".beads"), agent)
    try:
        async with Client(build_server(agent_store), read_timeout_seconds=DEADLINE) as client:
            yield client
    finally:
        agent_store.close()


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """Call `tool`; its reply as the JSON object it carries (text and structured content
    agree, and `ok` agrees with the result's error flag)."""
    result = await client.call_tool(tool, args)
    body = json.loads(result.content[0].text)
    assert body == result.structured_content
    assert body["ok"] is (not result.is_error)
    return body


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    anyio.run(scenario)


def run_in_process(
    project: Path, agent: str, scenario: Callable[[Client], Coroutine[Any, Any, None]]
) -> None:
    """Run `scenario` with a client of `agent`'s server in this process (`in_process`)."""

    async def connected() -> None:
        async with in_process(project, agent) as client:
            await scenario(client)

    anyio.run(connected)


def head_of(project: Path) -> bytes | None:
    """The commit the store of `project` is at."""
    return branch_head(project / ".beads")


def cli_json(gc: GcRunner, agent: str, *args: str) -> dict[str, Any]:
    reply = gc.json(*args, env={"GC_AGENT": agent})
    del reply["command"]
    return reply


@pytest.mark.slow
def test_mail_tools_act_as_the_sessions_agent_and_answer_as_the_cli_does(
    project: Path, gc_store: GcRunner
) -> None:
    # dog's server is the real `gc mcp` of a session whose $GC_AGENT is dog: every call of
    # dog's (reads, a reply, a search, refusals) shows the process acting as its agent. The
    # sender's server needs no process of its own to show that (one more process would cost
    # the SDK's import again): mayor's is served in this process.
    async def scenario() -> None:
        async with in_process(project, "mayor") as mayor, served(project, "dog") as dog:
            sent = await call(mayor, "mail_send", to=["dog"], subject="Review", body="the PR",
                              cc=["cat"])  # fmt: skip
            first = sent["message"]
            assert sent["command"] == "mail.send" and first["from"] == "mayor"
            assert [m["to"] for m in sent["messages"]] == ["dog", "dog"]  # dog's and cat's copy
            inbox = await call(dog, "mail_inbox")
            assert {k: v for k, v in inbox.items() if k != "command"} == cli_json(
                gc_store, "dog", "mail", "inbox"
            )
            assert [m["id"] for m in inbox["messages"]] == [first["id"]]
            assert (await call(dog, "mail_count"))["unread"] == 1
            peeked = await call(dog, "mail_peek", message_id=first["id"])
            assert peeked["message"]["read"] is False
            read = await call(dog, "mail_read", message_id=first["id"][:7])
            assert read["message"]["read"] is True
            count = await call(dog, "mail_count")
            assert {k: v for k, v in count.items() if k != "command"} == cli_json(
                gc_store, "dog", "mail", "count"
            )
            answer = await call(dog, "mail_reply", message_id=first["id"], body="looks good")
            assert answer["message"]["to"] == "mayor" and answer["message"]["from"] == "dog"
            thread = await call(dog, "mail_thread", thread_id=first["id"])
            assert [m["body"] for m in thread["messages"]] == ["the PR", "looks good"]
            thread = await call(mayor, "mail_thread", thread_id=answer["message"]["id"])
            assert [m["to"] for m in thread["messages"]] == ["dog", "dog", "mayor"]  # cat's too
            found = await call(dog, "mail_search", query="revi")  # received, and sent: "Re: "
            assert [m["id"] for m in found["messages"]] == [answer["message"]["id"], first["id"]]
            assert found["messages"][1]["mailbox"] == "dog" and found["more"] is False
            assert (await call(dog, "mail_search", query="revi", limit=1))["more"] is True
            sent_found = await call(mayor, "mail_search", query="review")
            ids = [answer["message"]["id"], first["id"]]  # received, and sent (once, not per copy)
            assert [m["id"] for m in sent_found["messages"]] == ids
            archived = await call(dog, "mail_archive", message_ids=[first["id"]])
            assert archived["archived"] == [first["id"]] and archived["already"] == []
            assert (await call(dog, "mail_inbox", archived=True))["messages"][0]["id"] == (
                first["id"]
            )
            # Another agent's copy is neither read nor archived through this agent.
            cat_copy = sent["messages"][1]["id"]
            refused = await call(dog, "mail_read", message_id=cat_copy)
            assert refused["error"]["code"] == "not_found"
            refused = await call(dog, "mail_archive", message_ids=[cat_copy])
            assert refused["error"]["code"] == "not_found"
            missing = await call(dog, "mail_peek", message_id="gc-zzzzzzzz")
            assert missing["error"]["code"] == "not_found"

    run(scenario)
    store = Store.open(project)
    try:
        cat_copy = store.list(type="message", assignee="cat")[0]
        assert cat_copy.meta["read"] is False and cat_copy.status == "open"
        # The commits name the agent of each server as their author.
        authors = {entry.author.split(" <")[0] for entry in store.log(None, 20)}
        assert {"mayor", "dog"} <= authors
    finally:
        store.close()


def test_work_thread_tools_claim_report_wait_and_finish(project: Path, gc_store: GcRunner) -> None:
    async def scenario() -> None:
        async with in_process(project, "mayor") as mayor, in_process(project, "dog") as dog:
            made = await call(mayor, "thread_send", to="dog", subject="Build it", body="now",
                              priority="high", payload={"n": 1})  # fmt: skip
            thread_id = made["thread"]["thread_id"]
            assert made["thread"]["status"] == "pending" and made["message"]["kind"] == "task"
            fetched = await call(dog, "thread_fetch")
            assert [t["thread_id"] for t in fetched["threads"]] == [thread_id]
            claimed = await call(dog, "thread_claim", thread_id=thread_id, lease_seconds=60)
            token = claimed["lease"]["token"]
            assert claimed["thread"]["status"] == "claimed"
            taken = await call(mayor, "thread_claim", thread_id=thread_id)
            assert taken["error"]["code"] == "lease_conflict"
            renewed = await call(dog, "thread_renew", thread_id=thread_id, lease_seconds=120)
            assert renewed["lease"]["token"] == token
            stale = await call(dog, "thread_update", thread_id=thread_id, lease_token="0" * 16)
            assert stale["error"]["code"] == "lease_conflict"
            progress = await call(dog, "thread_update", thread_id=thread_id,
                                  status="in_progress", summary="half way")  # fmt: skip
            assert progress["thread"]["status"] == "in_progress"
            note = await call(mayor, "thread_reply", thread_id=thread_id, kind="control",
                              body="hurry")  # fmt: skip
            assert note["message"]["to_agent"] == "dog"
            start = (await call(mayor, "thread_show", thread_id=thread_id))["messages"][-1]

            async def finish() -> None:
                await anyio.sleep(0.2)  # let the wait start first (it would see it anyway)
                done = await call(dog, "thread_done", thread_id=thread_id, summary="built",
                                  artifacts=[{"path": "out.txt", "kind": "log"}])  # fmt: skip
                assert done["thread"]["status"] == "done"

            async with anyio.create_task_group() as group:
                group.start_soon(finish)
                since = {"after_event": start["event_id"], "timeout_seconds": DEADLINE}
                woke = await call(mayor, "thread_wait_reply", thread_id=thread_id, **since)
            assert woke["woke"] is True and woke["message"]["kind"] == "result"
            assert woke["message"]["artifacts"][0]["kind"] == "log"
            since = {"after_event": woke["next_event_id"], "timeout_seconds": 0.2}
            nothing = await call(mayor, "thread_wait_reply", thread_id=thread_id, **since)
            assert nothing["ok"] is True and nothing["woke"] is False
            shown = await call(mayor, "thread_show", thread_id=thread_id)
            cli = cli_json(gc_store, "mayor", "thread", "show", thread_id)
            assert shown["messages"] == cli["messages"]
            assert shown["thread"]["status"] == cli["thread"]["status"] == "done"
            again = await call(dog, "thread_claim", thread_id=thread_id)
            assert again["error"]["code"] == "invalid_transition"
            # Release and cancel, on a second thread open to every agent.
            pool = await call(mayor, "thread_send", subject="Anyone")
            pool_id = pool["thread"]["thread_id"]
            await call(dog, "thread_claim", thread_id=pool_id)
            released = await call(dog, "thread_release", thread_id=pool_id, reason="busy")
            assert released["thread"]["status"] == "pending"
            await call(dog, "thread_claim", thread_id=pool_id)
            failed = await call(dog, "thread_fail", thread_id=pool_id, body="no disk")
            assert failed["thread"]["status"] == "failed"
            third = await call(mayor, "thread_send", subject="Later", to="cat")
            third_id = third["thread"]["thread_id"]
            cancelled = await call(mayor, "thread_cancel", thread_id=third_id, reason="moot")
            assert cancelled["thread"]["status"] == "cancelled"

    run(scenario)


def test_tools_give_the_origin_of_a_bead_written_on_another_machine(
    project: Path, gc_store: GcRunner
) -> None:
    # The beads of the first machine id stand for another machine's (as after a sync): the
    # store then takes a machine id of its own, as a copy of a store does.
    assert gc_store("config", "set", "--local", "delivery.nats.machine", "build-01").returncode == 0
    there = cli_json(gc_store, "human", "mail", "send", "mayor", "-s", "Hi", "-m", "b")
    sent = cli_json(gc_store, "mayor", "thread", "send", "--to", "dog", "--subject", "DB?",
                    "--summary", "which one")  # fmt: skip
    thread_id, question = sent["thread"]["thread_id"], sent["message"]["message_id"]
    far = cli_json(gc_store, "dog", "thread", "reply", "--thread", thread_id, "--summary", "pg")
    git_config = ["git", "--git-dir", str(project / ".beads" / ".git"), "config"]
    subprocess.run([*git_config, "machine.id", "m-00000000000000aa"], check=True)
    here = cli_json(gc_store, "human", "mail", "send", "mayor", "-s", "Yo", "-m", "a")
    near = cli_json(gc_store, "dog", "thread", "reply", "--thread", thread_id, "--summary", "ok")
    there, here = there["message"]["id"], here["message"]["id"]

    async def scenario(mayor: Client) -> None:
        read = await call(mayor, "mail_read", message_id=there)
        assert read["origin"] == "(from human on build-01)", read
        assert (await call(mayor, "mail_peek", message_id=there))["origin"] == read["origin"]
        assert (await call(mayor, "mail_read", message_id=here))["origin"] is None
        assert (await call(mayor, "mail_peek", message_id=here))["origin"] is None
        wait = {"thread_id": thread_id, "timeout_seconds": 0}
        woke = await call(mayor, "thread_wait_reply", after_message=question, **wait)
        assert woke["message"]["message_id"] == far["message"]["message_id"], woke
        assert woke["origin"] == "(from dog on build-01)", woke
        after = far["message"]["message_id"]
        woke = await call(mayor, "thread_wait_reply", after_message=after, **wait)
        assert woke["message"]["message_id"] == near["message"]["message_id"], woke
        assert woke["origin"] is None, woke

    run_in_process(project, "mayor", scenario)


def test_thread_tools_and_decisions_walk_the_history_for_origins_only_once_while_it_stays(
    project: Path, gc_store: GcRunner, origin_walks: list[bytes | None]
) -> None:
    # As the mail tools do (the origins kept on disk, `inbox.origincache`): thread_show,
    # thread_wait_reply and decision_list walked the whole history on every call.
    assert gc_store("config", "set", "--local", "delivery.nats.machine", "build-01").returncode == 0
    sent = cli_json(gc_store, "mayor", "thread", "send", "--to", "dog", "--subject", "DB?",
                    "--summary", "which one")  # fmt: skip
    thread_id, question = sent["thread"]["thread_id"], sent["message"]["message_id"]
    far = cli_json(gc_store, "dog", "thread", "reply", "--thread", thread_id, "--summary", "pg")
    asked = cli_json(gc_store, "dog", "decision", "create", "--to", "mayor", "--option", "a",
                     "--option", "b", "--prompt", "Which?")["bead"]["id"]  # fmt: skip
    git_config = ["git", "--git-dir", str(project / ".beads" / ".git"), "config"]
    subprocess.run([*git_config, "machine.id", "m-00000000000000aa"], check=True)
    walks = origin_walks
    dog, mayor = "(from dog on build-01)", "(from mayor on build-01)"

    async def looked_up(client: Client) -> tuple[dict[str, Any], ...]:
        shown = await call(client, "thread_show", thread_id=thread_id)
        wait = {"thread_id": thread_id, "after_message": question, "timeout_seconds": 0}
        woke = await call(client, "thread_wait_reply", **wait)
        listed = await call(client, "decision_list")
        return (
            {m["message_id"]: m["origin"] for m in shown["messages"]},
            {woke["message"]["message_id"]: woke["origin"]},
            {d["id"]: d["origin"] for d in listed["beads"]},
        )

    async def scenario(client: Client) -> None:
        first = await looked_up(client)
        assert first == (
            {question: mayor, far["message"]["message_id"]: dog},
            {far["message"]["message_id"]: dog},
            {asked: dog},
        )
        walked = len(walks)
        assert await looked_up(client) == first
        assert len(walks) == walked  # the branch has not moved: nothing walked again
        near = cli_json(
            gc_store, "dog", "thread", "reply", "--thread", thread_id, "--summary", "ok"
        )
        shown = await call(client, "thread_show", thread_id=thread_id)
        assert shown["messages"][-1]["message_id"] == near["message"]["message_id"]
        assert [m["origin"] for m in shown["messages"]] == [mayor, dog, None]
        # Only the commits since the last lookup walked, for the new message as for the rest.
        assert [stop is None for stop in walks[walked:]] == [False]

    run_in_process(project, "mayor", scenario)


def test_a_server_reads_no_origins_file_again_while_the_branch_stays(
    project: Path, gc_store: GcRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each mail_inbox and thread_show opened the origins kept on disk (.runtime/origins.sqlite3)
    # again though the branch had not moved: the answers at a head are kept with the server.
    from inbox import origincache

    loads: list[set[str]] = []
    load = origincache.load

    def counted(root: Path, wanted: set[str]) -> Any:
        loads.append(set(wanted))
        return load(root, wanted)

    monkeypatch.setattr(origincache, "load", counted)
    assert gc_store("config", "set", "--local", "delivery.nats.machine", "build-01").returncode == 0
    cli_json(gc_store, "human", "mail", "send", "mayor", "-s", "Hi", "-m", "b")
    sent = cli_json(gc_store, "mayor", "thread", "send", "--to", "dog", "--subject", "DB?",
                    "--summary", "which one")  # fmt: skip
    thread_id = sent["thread"]["thread_id"]
    git_config = ["git", "--git-dir", str(project / ".beads" / ".git"), "config"]
    subprocess.run([*git_config, "machine.id", "m-00000000000000aa"], check=True)
    human, mayor = "(from human on build-01)", "(from mayor on build-01)"

    async def looked_up(client: Client) -> list[str | None]:
        inbox = await call(client, "mail_inbox")
        shown = await call(client, "thread_show", thread_id=thread_id)
        return [m["origin"] for m in inbox["messages"] + shown["messages"]]

    async def scenario(client: Client) -> None:
        assert await looked_up(client) == [human, mayor]
        assert len(loads) == 2
        assert await looked_up(client) == [human, mayor]
        assert len(loads) == 2  # the same head: no file opened
        here = cli_json(gc_store, "human", "mail", "send", "mayor", "-s", "Yo", "-m", "a")
        assert await looked_up(client) == [human, None, mayor]
        assert len(loads) == 4  # the branch moved: looked up again, the new message too
        assert any(here["message"]["id"] in path for path in loads[2])

    run_in_process(project, "mayor", scenario)


def test_a_server_held_open_gives_the_origins_of_each_new_head_sync_reset_or_machine_id(
    pair: tuple[GcRunner, GcRunner],
) -> None:
    # The answers a server keeps between calls (`inbox.origin._memo`) hold only at the head,
    # machine id and claimed record they were read at: a message synced in between two
    # calls, a newer change made elsewhere to one already shown, a reset, another machine id.
    a, b = pair
    a, b = named(a, "build-02"), named(b, "build-01")
    human, mayor = {"GC_AGENT": "human"}, {"GC_AGENT": "mayor"}
    from_human, read_there = "(from human on build-01)", "(from mayor on build-01)"
    first = b.json("mail", "send", "mayor", "-s", "one", "-m", "b", env=human)["message"]["id"]
    assert b("sync").returncode == 0 and a("sync").returncode == 0
    here = a.json("mail", "send", "mayor", "-s", "two", "-m", "a", env=human)["message"]["id"]
    a_git = str(a.cwd / ".beads" / ".git")

    async def origins(client: Client) -> dict[str, str | None]:
        listed = await call(client, "mail_inbox", all=True)
        return {m["id"]: m["origin"] for m in listed["messages"]}

    async def scenario(client: Client) -> None:
        assert await origins(client) == {first: from_human, here: None}
        before = git("rev-parse", "main", cwd=a.cwd / ".beads").strip()
        second = b.json("mail", "send", "mayor", "-s", "3", "-m", "b", env=human)["message"]["id"]
        assert b("sync").returncode == 0 and a("sync").returncode == 0
        assert await origins(client) == {first: from_human, here: None, second: from_human}
        # A newer change made elsewhere to a message already shown replaces its origin.
        assert b("mail", "read", first, env=mayor).returncode == 0
        assert b("sync").returncode == 0 and a("sync").returncode == 0
        assert (await origins(client))[first] == read_there
        # Reset to before: the origins of that head again, and no message of after it.
        assert a("doctor", "--reset-to", before).returncode == 0
        assert await origins(client) == {first: from_human, here: None}
        # Another machine id, the branch unmoved: what this one wrote is now from elsewhere.
        subprocess.run(["git", "--git-dir", a_git, "config", "machine.id", "m-00000000000000aa"],
                       check=True)  # fmt: skip
        assert await origins(client) == {first: from_human, here: "(from human on build-02)"}

    run_in_process(a.cwd, "mayor", scenario)


def test_inbox_items_decisions_and_resources(project: Path, gc_store: GcRunner) -> None:
    gc_store("decision", "create", "--prompt", "Merge?", "--option", "y", "--option", "n",
             "--to", "dog", env={"GC_AGENT": "mayor"})  # fmt: skip
    gc_store("decision", "create", "--prompt", "Stop?", "--option", "y", "--option", "n",
             env={"GC_AGENT": "dog"})  # fmt: skip
    store = Store.open(project)
    try:
        mine = store.list(type="decision", assignee="dog")[0]
        human = store.list(type="decision", assignee="human")[0]
    finally:
        store.close()

    async def scenario() -> None:
        async with in_process(project, "mayor") as mayor, in_process(project, "dog") as dog:
            sent = await call(mayor, "mail_send", to=["dog"], body="ping")
            items = await call(dog, "inbox_list")
            keys = [i["key"] for i in items["items"]]
            assert items["agent"] == "dog" and f"mail:{sent['message']['id']}" in keys
            item = items["items"][keys.index(f"mail:{sent['message']['id']}")]
            peeked = await call(dog, "inbox_peek", item_id=item["id"])
            assert peeked["item"] == item  # and still undelivered:
            assert item["id"] in [i["id"] for i in (await call(dog, "inbox_list"))["items"]]
            assert (await call(dog, "inbox_peek", item_id=999999))["error"]["code"] == ("not_found")
            listed = await call(dog, "decision_list")
            assert [d["id"] for d in listed["beads"]] == [mine.id]
            for ref in (human.id, mine.id):  # a person's decision, then another's
                refused = await call(mayor if ref == mine.id else dog, "decision_answer",
                                     decision_id=ref, option="y")  # fmt: skip
                assert refused["error"]["code"] == "invalid_input", refused
            bad = await call(dog, "decision_answer", decision_id=mine.id, option="maybe")
            assert bad["error"]["code"] == "invalid_input"
            answered = await call(dog, "decision_answer", decision_id=mine.id, option="y",
                                  text="ship it")  # fmt: skip
            assert answered["bead"]["meta"]["answer"] == "y"
            assert answered["bead"]["meta"]["answered_by"] == "dog"
            assert (await call(dog, "decision_list"))["beads"] == []
            resources = {str(r.uri) for r in (await dog.list_resources()).resources}
            assert resources == {"gc://mail/inbox", "gc://threads/open"}
            inbox = json.loads((await dog.read_resource("gc://mail/inbox")).contents[0].text)
            assert [m["body"] for m in inbox["messages"]] == ["ping"]
            await call(mayor, "thread_send", subject="Open work")
            open_threads = json.loads(
                (await dog.read_resource("gc://threads/open")).contents[0].text
            )
            assert [t["subject"] for t in open_threads["threads"]] == ["Open work"]

    run(scenario)
    store = Store.open(project)
    try:
        assert store.get(human.id).status == "open"  # an agent never clears a person's gate
    finally:
        store.close()


def test_bad_arguments_are_clear_tool_errors_and_change_nothing(project: Path) -> None:
    head = head_of(project)

    async def scenario(mayor: Client) -> None:
        tools = (await mayor.list_tools()).tools
        assert len(tools) == 25
        for tool in tools:
            assert tool.description and tool.input_schema["type"] == "object"
            assert not {"agent", "from", "sender"} & set(tool.input_schema["properties"])
        cases = [
            ("mail_send", {"to": ["dog"], "from": "cat", "body": "x"}, "from: Extra"),
            ("mail_send", {"to": [], "body": "x"}, "to: List should have at least 1"),
            ("mail_send", {"to": ["dog"], "priority": 9, "body": "x"}, "priority:"),
            ("mail_send", {"to": ["../x"], "body": "x"}, "recipient"),
            ("mail_send", {"to": ["dog"]}, "nothing to send"),
            ("mail_read", {}, "message_id: Field required"),
            ("thread_claim", {"thread_id": "t", "lease_seconds": "soon"}, "lease_seconds"),
            ("thread_send", {"subject": "x", "kind": "gossip"}, "kind:"),
            ("thread_show", {"thread_id": "gc-zzzzzzzz"}, "no thread"),
            ("inbox_peek", {"item_id": "x"}, "item_id:"),
            ("no_such_tool", {}, "no tool 'no_such_tool'"),
        ]
        for tool, args, says in cases:
            result = await mayor.call_tool(tool, args)
            body = json.loads(result.content[0].text)
            assert result.is_error and body["ok"] is False, (tool, args)
            assert says in body["error"]["message"], body
            assert body["error"]["code"] in ("invalid_input", "not_found")
            assert "Traceback" not in result.content[0].text
            assert "\n" not in body["error"]["message"]

    run_in_process(project, "mayor", scenario)
    assert head_of(project) == head  # nothing written


def test_a_wait_the_client_cancels_ends_at_once(project: Path) -> None:
    said = io.StringIO()  # what the server writes to stderr

    async def scenario() -> None:
        async with in_process(project, "mayor") as mayor:
            made = await call(mayor, "thread_send", subject="Wait on me")
            thread_id = made["thread"]["thread_id"]
            with redirect_stderr(said):
                with anyio.move_on_after(0.5) as scope:  # the client gives up: it cancels
                    # Longer than the test may take: only the cancel ends it first, and a
                    # wait that held the event loop fails the test rather than hang it.
                    await call(mayor, "thread_wait_reply", thread_id=thread_id,
                               timeout_seconds=DEADLINE)  # fmt: skip
                assert scope.cancelled_caught
                with anyio.fail_after(DEADLINE):
                    while "was cancelled before a reply came" not in said.getvalue():
                        await anyio.sleep(0.05)
            # The server goes on serving.
            assert (await call(mayor, "mail_count"))["ok"] is True

    run(scenario)


def test_an_index_rebuilt_between_two_calls_is_the_one_read_next(
    project: Path, gc_store: GcRunner
) -> None:
    cli = gc_store
    sender = "rebuild-sender"  # whose inbox it lists whole at the end

    async def scenario(mayor: Client) -> None:
        sent = cli.json("mail", "send", "mayor", "original", env={"GC_AGENT": sender})
        message_id = sent["message"]["id"]
        assert (await call(mayor, "mail_peek", message_id=message_id))["message"]["body"] == (
            "original"
        )
        # The index gets a wrong row (as a damaged file might hold): served as it is ...
        with sqlite3.connect(project / ".beads" / ".runtime" / "index.sqlite3") as db:
            db.execute("UPDATE beads SET data = replace(data, 'original', 'garbled')")
        assert (await call(mayor, "mail_peek", message_id=message_id))["message"]["body"] == (
            "garbled"
        )
        # ... until gc doctor rebuilds it from git into a new file: the next call reads it.
        assert cli("doctor", "--rebuild-index").returncode == 0
        assert (await call(mayor, "mail_peek", message_id=message_id))["message"]["body"] == (
            "original"
        )
        # Writes go on through the new file, and the CLI sees them.
        await call(mayor, "mail_reply", message_id=message_id, body="seen")
        assert cli("doctor").returncode == 0
        inbox = cli_json(cli, sender, "mail", "inbox")
        assert [m["body"] for m in inbox["messages"]] == ["seen"]

    run_in_process(project, "mayor", scenario)


def test_a_directory_removed_between_two_calls_is_made_again_by_the_next_write(
    project: Path, gc_store: GcRunner
) -> None:
    cli = gc_store
    to = "removed-dir-recipient"  # its inbox is listed whole at the end
    messages = project / ".beads" / "messages"

    async def scenario(mayor: Client) -> None:
        sent = [(await call(mayor, "mail_send", to=[to], body="before"))["message"]["id"]]
        # Another process removes the directory the server wrote into (a person's rm -r).
        await anyio.run_process(["rm", "-r", str(messages)])
        for n in range(2):
            reply = await call(mayor, "mail_send", to=[to], body=f"after {n}")
            assert reply["ok"], reply
            sent.append(reply["message"]["id"])
        written = {path.stem for path in messages.rglob("*.yaml")}
        assert set(sent[1:]) <= written  # the server's writes made the directory again
        inbox = cli_json(cli, to, "mail", "inbox")
        assert sorted(m["id"] for m in inbox["messages"]) == sorted(sent)

    run_in_process(project, "mayor", scenario)
    # What the rm took is derived data: the doctor puts it back from git.
    assert cli("doctor", "--restore-view").returncode == 0
    assert cli.json("doctor")["healthy"]


@pytest.mark.slow
def test_two_servers_and_the_cli_writing_at_once_lose_nothing(
    project: Path, gc_store: GcRunner
) -> None:
    sends = 8  # each server's, one after another
    # `gc mail send` processes, all started with the servers' first sends: a process's
    # start-up outlasts several of a server's sends, so processes started together write
    # among the servers' sends (started one after another, most would write alone).
    cli_sends = 3
    acked: list[str] = []
    to = "at-once-recipient"  # its inbox is listed whole at the end

    async def scenario() -> None:
        async with served(project, "mayor") as mayor, served(project, "dog") as dog:
            await all_send({"mayor": mayor, "dog": dog})

    async def all_send(writers: dict[str, Client]) -> None:
        async def server_sends(agent: str) -> None:
            for n in range(sends):
                reply = await call(writers[agent], "mail_send", to=[to], body=f"{agent} {n}")
                acked.append(reply["message"]["id"])

        async def cli_send(n: int) -> None:
            result = await anyio.run_process(
                [gc_program(), "--json", "mail", "send", to, f"cli {n}"],
                cwd=project,
                env={**gc_store.env, "GC_AGENT": "cat"},  # fmt: skip
            )
            acked.append(json.loads(result.stdout)["message"]["id"])

        async with anyio.create_task_group() as group:
            group.start_soon(server_sends, "mayor")
            group.start_soon(server_sends, "dog")
            for n in range(cli_sends):
                group.start_soon(cli_send, n)

    run(scenario)
    assert len(set(acked)) == 2 * sends + cli_sends
    inbox = cli_json(gc_store, to, "mail", "inbox")
    assert sorted(m["id"] for m in inbox["messages"]) == sorted(acked)
    assert gc_store("doctor").returncode == 0


def _children_running(argument: str) -> list[int]:
    """Child processes of this one whose command line holds `argument`."""
    found = []
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                line = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except FileNotFoundError:
                continue
            if argument.encode() in line:
                found.append(int(pid))
    return found


def test_a_server_writes_its_answers_on_its_one_thread_answers_larger_than_a_pipe_whole(
    project: Path, gc_store: GcRunner
) -> None:
    # The SDK's own writer handed each answer's write and its flush to a worker thread: two
    # hand-offs a call, most of its cost on a busy machine. An answer is now written on the
    # event loop, in pieces a pipe takes whole: one larger than the pipe holds comes whole.
    bodies = [f"{n} " + "x" * 40_000 for n in range(4)]  # 160 KB: more than a pipe holds
    for body in bodies:
        assert cli_json(gc_store, "dog", "mail", "send", "mayor", body)["message"]["id"]

    async def scenario() -> None:
        marker = "--beads-dir=" + str(project / ".beads")  # tells this server's process
        async with served(project, "mayor", marker) as mayor:
            for _ in range(3):
                inbox = await call(mayor, "mail_inbox")
                assert [m["body"] for m in inbox["messages"]] == bodies
                assert (await call(mayor, "mail_count"))["unread"] == len(bodies)
            (pid,) = _children_running(marker)
            assert [task.name for task in Path(f"/proc/{pid}/task").iterdir()] == [str(pid)]

    anyio.run(scenario)


def test_output_of_the_servers_own_while_it_serves_goes_to_stderr_never_the_wire(
    project: Path,
) -> None:
    # The wire is fd 1 only through the server's own descriptor: a print, or a program it
    # runs writing to its stdout, lands on stderr, and every line the client reads is JSON.
    code = (
        "import subprocess, sys\n"
        "from mcpserver.agentstore import AgentStore\n"
        "counted = AgentStore.mail_count\n"
        "def chatty(self):\n"
        "    print('stray print', flush=True)\n"
        "    subprocess.run(['echo', 'stray child'], check=True)\n"
        "    return counted(self)\n"
        "AgentStore.mail_count = chatty\n"
        "sys.argv = ['gc', 'mcp']\n"
        "from gc_beads.entry import main\n"
        "main()\n"
    )
    count = {"name": "mail_count", "arguments": {}}
    lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": count})]
    done = subprocess.run([sys.executable, "-c", code], cwd=project, input=handshaken(lines),
                          env={**os.environ, "GC_AGENT": "mayor"}, capture_output=True,
                          timeout=DEADLINE)  # fmt: skip
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [0, 1]
    assert answers[1]["result"]["structuredContent"]["ok"] is True
    assert done.stderr.splitlines() == [b"stray print", b"stray child"]


def test_a_server_killed_mid_write_loses_nothing_it_acknowledged(
    project: Path, gc_store: GcRunner
) -> None:
    cli = gc_store
    acked: list[str] = []

    async def scenario() -> None:
        marker = "--beads-dir=" + str(project / ".beads")  # tells this server's process
        try:
            async with served(project, "mayor", marker) as mayor:

                async def keep_sending() -> None:
                    n = 0
                    while True:
                        reply = await call(mayor, "mail_send", to=["dog"], body=f"n {n}")
                        acked.append(reply["message"]["id"])
                        n += 1

                async with anyio.create_task_group() as group:
                    group.start_soon(keep_sending)
                    with anyio.fail_after(DEADLINE):
                        while len(acked) < 5:
                            await anyio.sleep(0.01)
                    (pid,) = _children_running(marker)
                    os.kill(pid, signal.SIGKILL)  # a send is (almost surely) under way
                    assert gone([pid])
        except Exception:  # the connection dies with the server: what it said is kept
            pass

    run(scenario)
    assert len(acked) >= 5
    assert cli("doctor").returncode == 0  # the store is whole
    inbox = cli_json(cli, "dog", "mail", "inbox")
    assert set(acked) <= {m["id"] for m in inbox["messages"]}

    # A server started after the kill writes: no lock left behind. (The store is the subject
    # here, not that server's process: one in this process, another than the killed one, shows
    # it as well.)
    async def again(mayor: Client) -> None:
        assert (await call(mayor, "mail_send", to=["dog"], body="after"))["ok"] is True

    run_in_process(project, "mayor", again)


SDK_LEFT_UNIMPORTED = """
import atexit, sys
atexit.register(lambda: print("mcp imported:", "mcp" in sys.modules))
sys.argv = ["gc", "mcp"]
from gc_beads.entry import script
script()
"""


def test_without_a_store_or_the_extra_gc_mcp_says_so_in_one_line(
    gc: GcRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = gc("mcp")
    assert result.returncode == 40 and result.stderr.count("\n") == 1
    # Said before the SDK is imported (most of a server's start-up).
    refused = subprocess.run(
        [sys.executable, "-c", SDK_LEFT_UNIMPORTED],
        cwd=gc.cwd,
        env=gc.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 40 and refused.stdout == "mcp imported: False\n", refused
    for name in [m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    for name in ("mcp", "mcp_types"):  # the extra's two packages, whether imported yet or not
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "mcpserver.server", raising=False)
    assert gc("init").returncode == 0
    result = gc("mcp")
    assert result.returncode == 30
    assert result.stderr == "gc: gc mcp needs the mcp extra: pip install 'gc-beads[mcp]'\n"


def test_install_writes_mcp_json_once_and_keeps_what_else_it_holds(
    gc_store: GcRunner,
) -> None:
    path = gc_store.cwd / ".mcp.json"
    other = {"command": "other-server", "args": ["--flag"]}
    path.write_text(json.dumps({"mcpServers": {"other": other}, "note": 1}))
    first = gc_store.json("mcp", "install")
    assert first["changed"] is True and first["file"] == str(path)
    written = json.loads(path.read_text())
    assert written["mcpServers"]["other"] == other and written["note"] == 1
    entry = written["mcpServers"]["gc-beads"]
    assert entry == {"type": "stdio", "command": "gc", "args": ["mcp"]}
    # No agent and no path of this machine: the file is shared with the project.
    assert str(gc_store.cwd) not in path.read_text() and "GC_" not in path.read_text()
    before = path.read_bytes()
    assert gc_store.json("mcp", "install")["changed"] is False
    assert path.read_bytes() == before
    text = gc_store("mcp", "install").stdout
    assert "already has gc-beads" in text and "codex" in text and "gemini" in text
    path.write_text("[1, 2]")
    refused = gc_store("mcp", "install")
    assert refused.returncode == 30 and "must hold a JSON object" in refused.stderr


def test_install_into_a_folder_that_does_not_exist_is_refused_as_bad_input(
    gc_store: GcRunner,
) -> None:
    refused = gc_store("mcp", "install", "--file", "no-such-folder/mcp.json")
    assert refused.returncode == 30, refused.stderr
    assert refused.stderr.count("\n") == 1 and "no directory" in refused.stderr
    assert not (gc_store.cwd / "no-such-folder").exists()


def test_lines_that_are_no_message_are_answered_with_json_rpc_errors_never_dropped(
    project: Path,
) -> None:
    # Over the real wire: each line below the SDK would have dropped without a word, leaving
    # a client waiting for an answer that never comes.
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "raw", "version": "1"}}  # fmt: skip
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        # Requests that carry a usable id are answered with that id.
        '{"jsonrpc":"2.0","id":"surrogate","method":"tools/call","params":{"name":"mail_send",'
        '"arguments":{"to":["dog"],"body":"\\ud800"}}}',
        '{"jsonrpc":"1.0","id":"old","method":"ping"}',
        '{"jsonrpc":"2.0","id":"params","method":"tools/call","params":[]}',
        # The others with a null id.
        "not json",
        '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}',
        '{"jsonrpc":"2.0","id":null,"method":"ping"}',
        "[]",
        "[" * 100_000,
        "",  # a blank line says nothing and is not answered
        json.dumps({"jsonrpc": "2.0", "id": "last", "method": "ping"}),
    ]
    wire = b"\n".join(line.encode() for line in lines) + b"\n\xff\xfe\n"
    env = {**os.environ, "GC_AGENT": "mayor"}
    done = subprocess.run([gc_program(), "mcp"], cwd=project, env=env, input=wire,
                          capture_output=True, timeout=DEADLINE)  # fmt: skip
    assert done.returncode == 0 and b"Traceback" not in done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    assert by_id["last"]["result"] == {}  # the server still serves after all of them
    assert by_id["surrogate"]["error"]["code"] == -32700
    assert "surrogate" in by_id["surrogate"]["error"]["message"]
    assert by_id["old"]["error"]["code"] == by_id["params"]["error"]["code"] == -32600
    nulls = sorted(a["error"]["code"] for a in answers if a["id"] is None)
    # not json, the \xff\xfe line, nested too deep: parse errors; the rest invalid requests.
    assert nulls == [-32700] * 3 + [-32600] * 3
    # Nothing was sent: the lone surrogate reached no store.
    assert "surrogate" not in subprocess.run(
        [gc_program(), "--json", "mail", "inbox", "dog"], cwd=project, env=env,
        capture_output=True, text=True, timeout=DEADLINE).stdout  # fmt: skip


def test_a_message_giving_a_key_twice_is_refused_naming_the_key_never_served(
    project: Path,
) -> None:
    # Over the real wire: the SDK's parser keeps a repeated key's last value, so the first
    # line would be served as tools/list and the second would send "b".
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "raw", "version": "1"}}  # fmt: skip
    head = head_of(project)
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}',
        '{"jsonrpc":"2.0","id":"send","method":"tools/call","params":{"name":"mail_send",'
        '"arguments":{"to":["dog"],"body":"a","body":"b"}}}',
        '{"jsonrpc":"2.0","id":2,"id":3,"method":"ping"}',  # which id is meant: neither
        '{"jsonrpc":"2.0","method":"ping","method":"ping","id":"cut"',  # no JSON: parse error
        json.dumps({"jsonrpc": "2.0", "id": "last", "method": "ping"}),
    ]
    wire = "".join(f"{line}\n" for line in lines).encode()
    env = {**os.environ, "GC_AGENT": "mayor"}
    done = subprocess.run([gc_program(), "mcp"], cwd=project, env=env, input=wire,
                          capture_output=True, timeout=DEADLINE)  # fmt: skip
    assert done.returncode == 0 and b"Traceback" not in done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    said = "Invalid Request: the message has the key 'method' twice"
    assert by_id[1] == {"jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": said}}
    assert by_id["send"]["error"]["code"] == -32600
    assert "'body' twice" in by_id["send"]["error"]["message"]
    assert by_id["last"]["result"] == {}  # still serving
    nulls = [(a["error"]["code"], a["error"]["message"]) for a in answers if a["id"] is None]
    assert nulls[0] == (-32600, "Invalid Request: the message has the key 'id' twice")
    assert [code for code, _ in nulls] == [-32600, -32700]
    assert set(by_id) == {0, 1, "send", "last"}  # nothing else was served
    assert head_of(project) == head  # nothing was sent


def handshaken(lines: list[str]) -> bytes:
    """What a client sends for `lines`: the handshake first, a line each."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "raw", "version": "1"}}  # fmt: skip
    handshake = [
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
    return "".join(f"{line}\n" for line in handshake + lines).encode()


def piped(
    project: Path, lines: list[str], grace: float | None = None
) -> tuple[subprocess.CompletedProcess[bytes], list[Any]]:
    """`gc mcp` as mayor in `project` fed `lines` after the handshake and then the end of its
    input, as a script piping its requests sends them; the process and its answers. `grace`:
    the seconds requests may run on after that end, when not the server's own."""
    from mcpserver.server import GRACE_ENV

    env = {**os.environ, "GC_AGENT": "mayor"}
    if grace is not None:
        env[GRACE_ENV] = str(grace)
    done = subprocess.run([gc_program(), "mcp"], cwd=project, env=env, input=handshaken(lines),
                          capture_output=True, timeout=DEADLINE)  # fmt: skip
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    return done, [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.slow
def test_every_request_read_before_stdin_closes_is_answered_before_the_server_exits(
    project: Path, gc_store: GcRunner
) -> None:
    # A flood closed at once: the SDK ends its session at the end of the input, cancelling
    # every request it has not answered yet (most of these, the send last of all).
    pings = [json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"}) for n in range(1, 3001)]
    send = {"name": "mail_send", "arguments": {"to": ["dog"], "body": "sent last"}}
    last = json.dumps({"jsonrpc": "2.0", "id": "send", "method": "tools/call", "params": send})
    _, answers = piped(project, [*pings, last])
    assert len(answers) == 3002
    by_id = {a["id"]: a for a in answers}
    assert set(by_id) == {*range(3001), "send"}
    assert all(by_id[n]["result"] == {} for n in range(1, 3001))
    sent = by_id["send"]["result"]["structuredContent"]
    assert sent["ok"] is True
    inbox = cli_json(gc_store, "dog", "mail", "inbox")
    assert [m["id"] for m in inbox["messages"]] == [sent["message"]["id"]]


def waiting(thread_id: str, ident: str, seconds: float) -> str:
    """A `thread_wait_reply` request with id `ident`, waiting up to `seconds` on `thread_id`."""
    args = {"thread_id": thread_id, "timeout_seconds": seconds}
    params = {"name": "thread_wait_reply", "arguments": args}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                       "params": params})  # fmt: skip


def test_a_wait_under_way_when_stdin_closes_ends_as_it_would_have_within_the_grace_unless_cancelled(
    project: Path, gc_store: GcRunner
) -> None:
    thread_id = cli_json(gc_store, "mayor", "thread", "send", "--subject", "Wait")["thread"][
        "thread_id"
    ]
    cancel = {"requestId": "cancelled", "reason": "moot"}
    lines = [
        # Longer than the server's grace: ended unanswered by its cancel, not at the grace's
        # end (`Connection closed`).
        waiting(thread_id, "cancelled", 3600),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}),
        waiting(thread_id, "waits", 0.5),  # well within the grace
    ]
    done, answers = piped(project, lines)
    by_id = {a["id"]: a for a in answers}
    assert set(by_id) == {0, "waits"}  # a request the client cancelled is never answered
    waited = by_id["waits"]["result"]["structuredContent"]
    assert waited["ok"] is True and waited["woke"] is False  # its whole time, then no reply
    assert b"was cancelled before a reply came" in done.stderr


@pytest.mark.slow
def test_a_long_wait_under_way_when_stdin_closes_is_ended_after_the_grace_and_the_server_exits(
    project: Path, gc_store: GcRunner
) -> None:
    # A client that went away mid-wait: its server does not live on for the hour. (A grace
    # of a few seconds, not the server's own, so the test does not wait that long; `piped`
    # fails the test when the server has not exited within DEADLINE, over ten graces.)
    thread_id = cli_json(gc_store, "mayor", "thread", "send", "--subject", "Wait")["thread"][
        "thread_id"
    ]
    send = {"name": "mail_send", "arguments": {"to": ["dog"], "body": "sent mid-wait"}}
    lines = [
        waiting(thread_id, "waits", 3600),
        json.dumps({"jsonrpc": "2.0", "id": "send", "method": "tools/call", "params": send}),
    ]
    _, answers = piped(project, lines, grace=5)
    by_id = {a["id"]: a for a in answers}
    assert set(by_id) == {0, "waits", "send"}
    assert by_id["waits"]["error"]["message"] == "Connection closed"  # ended, as the SDK ends it
    sent = by_id["send"]["result"]["structuredContent"]  # the write was done and answered
    inbox = cli_json(gc_store, "dog", "mail", "inbox")
    assert [m["id"] for m in inbox["messages"]] == [sent["message"]["id"]]


def test_a_client_that_stops_reading_ends_the_server_quietly(project: Path, tmp_path: Path) -> None:
    # `gc mcp < flood.jsonl | head -1`: more answers than a pipe holds, the reader gone after
    # the first.
    flood = tmp_path / "flood.jsonl"
    pings = [json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"}) for n in range(1, 3001)]
    flood.write_bytes(handshaken(pings))
    errors = tmp_path / "stderr"
    env = {**os.environ, "GC_AGENT": "mayor"}
    with flood.open("rb") as stdin, errors.open("wb") as stderr:
        server = subprocess.Popen([gc_program(), "mcp"], cwd=project, env=env, stdin=stdin,
                                  stdout=subprocess.PIPE, stderr=stderr)  # fmt: skip
        try:
            assert server.stdout is not None
            first = json.loads(server.stdout.readline())
            server.stdout.close()
            code = server.wait(timeout=DEADLINE)
        finally:
            server.kill()
            server.wait()
    assert first["id"] == 0
    assert (code, errors.read_bytes()) == (0, b"")


@pytest.mark.parametrize("then", ["silent", "one more request"])
def test_a_client_that_closes_stdout_but_keeps_stdin_open_ends_the_server_quietly(
    project: Path, tmp_path: Path, then: str
) -> None:
    # The client closed its reading end and holds stdin open, saying nothing more (no answer
    # is written that could fail), or sending a request whose answer cannot be written: the
    # server ended only once stdin closed.
    errors = tmp_path / "stderr"
    env = {**os.environ, "GC_AGENT": "mayor"}
    with errors.open("wb") as stderr:
        server = subprocess.Popen([gc_program(), "mcp"], cwd=project, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=stderr)  # fmt: skip
        assert server.stdin is not None and server.stdout is not None
        try:
            server.stdin.write(handshaken([]))
            server.stdin.flush()
            first = json.loads(server.stdout.readline())
            server.stdout.close()
            if then == "one more request":
                server.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
                server.stdin.flush()
            code = server.wait(timeout=DEADLINE)  # stdin still open
        finally:
            server.kill()
            server.wait()
            server.stdin.close()
    assert first["id"] == 0
    assert (code, errors.read_bytes()) == (0, b"")


def test_a_server_started_with_stdout_closed_ends_quietly(project: Path) -> None:
    # `gc mcp >&-`: no answer can be given. It was an internal error (exit 50).
    env = {**os.environ, "GC_AGENT": "mayor"}
    with subprocess.Popen(
        [gc_program(), "mcp"],
        cwd=project,
        env=env,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: os.close(1),  # noqa: PLW1509 - the child's stdout, closed
    ) as server:
        try:
            code = server.wait(timeout=DEADLINE)  # stdin open and silent
        finally:
            server.kill()
        assert server.stderr is not None
        assert (code, server.stderr.read()) == (0, b"")


def test_an_argument_of_another_json_type_is_refused_not_converted(project: Path) -> None:
    head = head_of(project)

    async def scenario(mayor: Client) -> None:
        cases = [
            ("mail_send", {"to": ["dog"], "body": "x", "priority": True}, "priority"),
            ("mail_send", {"to": ["dog"], "body": "x", "priority": "1"}, "priority"),
            ("mail_inbox", {"limit": "5"}, "limit"),
            ("mail_inbox", {"all": 1}, "all"),
            ("mail_search", {"query": "x", "archived": "false"}, "archived"),
            ("inbox_peek", {"item_id": "1"}, "item_id"),
            ("mail_inbox", {"limit": 2.5}, "limit"),
        ]
        for tool, args, name in cases:
            result = await mayor.call_tool(tool, args)
            body = json.loads(result.content[0].text)
            assert result.is_error and body["error"]["code"] == "invalid_input", (tool, args)
            assert body["error"]["message"].startswith(f"{tool}: {name}"), body
        # A number where the schema says number takes an integer too, and one where it says
        # integer a number with no fraction (JSON Schema's integer: 5.0 is one).
        reply = await call(mayor, "thread_wait_reply", thread_id="gc-zzzzzzzz", timeout_seconds=0)
        assert reply["error"]["code"] == "not_found", reply
        assert (await call(mayor, "mail_inbox", limit=5.0))["ok"] is True

    run_in_process(project, "mayor", scenario)
    assert head_of(project) == head  # nothing written


def test_a_nul_in_a_body_or_subject_is_refused_naming_that_field(project: Path) -> None:
    async def scenario(mayor: Client) -> None:
        for args, field in [
            ({"to": ["dog"], "body": "a\x00b"}, "body"),
            ({"to": ["dog"], "subject": "a\x00b", "body": "x"}, "subject"),
        ]:
            reply = await call(mayor, "mail_send", **args)
            assert reply["error"]["code"] == "invalid_input"
            assert reply["error"]["message"].startswith(f"{field} contains a NUL byte"), reply
        sent = await call(mayor, "mail_send", to=["mayor"], body="first")
        reply = await call(mayor, "mail_reply", message_id=sent["message"]["id"], body="\x00")
        assert reply["error"]["message"].startswith("body contains a NUL byte"), reply

    run_in_process(project, "mayor", scenario)
