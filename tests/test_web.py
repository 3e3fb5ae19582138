"""`gc web`: the site served on a free loopback port, read over HTTP and in a real browser.

The browser is Debian's headless Chromium driven through WebDriver (`chromium-driver` and the
`selenium` client): started once for the module, it loads the pages, and the tests read the
rendered DOM. Without it the browser tests fail (CI installs it; see .ci/run). The run writes
screenshots of a conversation and of the history to the directory it prints
(`web-screenshots/` at the project root, or `$GC_WEB_SCREENSHOTS`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from werkzeug.serving import BaseWSGIServer

import web.data
from beads.errors import InvalidInput
from beads.store import Store
from gates.decisions import create_decision
from inbox.delivery import Delivery
from mail import api
from mail.beadmail import BeadMail
from mail.threads.api import Threads
from tests.conftest import GcRunner, copy_store, gc_program
from web.app import serve, url_of

ROOT = Path(__file__).resolve().parent.parent
SCRIPT_SUBJECT = '<script>document.title="owned"</script>Hi'
SCRIPT_BODY = (
    '<img src=x onerror="document.title=\'owned\'"><script>document.title="owned"</script>'
)


class Site:
    """A store with a three-agent conversation, a work thread, a decision and an update,
    served on a free loopback port."""

    def __init__(self, root: Path) -> None:
        self.store, _ = Store.init(root, agent="mayor")
        self.root = self.store.root
        self.stores: list[Store] = [self.store]
        mayor, dog, cat = BeadMail(self.store), self.mail("dog"), self.mail("cat")
        self.task = self.store.create("task", "Fix the build", "CI is red", assignee="dog")
        # The conversation: mayor -> dog (cc cat); dog reads and replies; mayor reads and
        # archives the reply; cat never opens its copy.
        sent = api.send(mayor, "mayor", ["dog"], "Review the PR",
                        f"Please look at {self.task.id} first.", cc=["cat"])  # fmt: skip
        self.first, self.cat_copy = sent.messages
        dog.read(self.first.id)
        self.reply = api.reply(dog, self.first.id, "dog", "", "Looks good to me").messages[0]
        mayor.read(self.reply.id)
        mayor.archive(self.reply.id)
        cat.store.create("task", "Unrelated", "", assignee="cat")
        self.hostile = api.send(cat, "cat", ["dog"], SCRIPT_SUBJECT, SCRIPT_BODY).messages[0]
        threads = Threads(self.open("mayor"))
        self.work, _ = threads.send("mayor", to="dog", subject="Port the parser", body="spec")
        Threads(self.open("dog")).claim("dog", self.work.thread_id)
        self.decision, self.gate = create_decision(self.store, "Ship it?", ["yes", "no"])
        with Delivery(self.root) as delivery:
            delivery.register("session-of-dog", "dog")
        # The update the history must show field by field.
        self.store.update(self.task.id, title="Fix the build now", labels=["ci"],
                          meta={"owner": "dog"})  # fmt: skip
        self.server = serve(self.store)
        self.url = url_of(self.server)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def open(self, agent: str) -> Store:
        opened = Store.open(self.root, agent=agent)
        self.stores.append(opened)
        return opened

    def mail(self, agent: str) -> BeadMail:
        return BeadMail(self.open(agent))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        for opened in self.stores:
            opened.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    made = Site(tmp_path_factory.mktemp("web"))
    yield made
    made.close()


class _Unfollowed(urllib.request.HTTPRedirectHandler):
    """A redirect answered as it is (an HTTPError of its status), not followed."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def fetch(
    url: str, *, headers: dict[str, str] | None = None, follow: bool = True
) -> tuple[int, dict[str, str], str]:
    """GET `url`: status, headers, text (an error status too); a redirect is followed unless
    `follow` is false."""
    request = urllib.request.Request(url, headers=headers or {})
    opener = urllib.request.build_opener(*([] if follow else [_Unfollowed()]))
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def get_json(site: Site, path: str) -> dict[str, Any]:
    status, headers, text = fetch(site.url + path, headers={"Accept": "application/json"})
    assert status == 200, text
    assert headers["Content-Type"].startswith("application/json")
    return json.loads(text)


# -- the browser -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through WebDriver, once for the module. Missing, it skips the test,
    except under `CI=true`, where a missing browser is a failure."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        reason = (
            "the browser tests need Debian's chromium and chromium-driver "
            "(apt-get install -y chromium chromium-driver; ./test.sh installs them as root "
            "or under CI=true)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1200,900"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def screenshots() -> Path:
    where = Path(os.environ.get("GC_WEB_SCREENSHOTS") or ROOT / "web-screenshots")
    where.mkdir(parents=True, exist_ok=True)
    return where


def texts(browser: Any, selector: str) -> list[str]:
    from selenium.webdriver.common.by import By

    return [e.text for e in browser.find_elements(By.CSS_SELECTOR, selector)]


def wait_for_a_new_page(browser: Any) -> None:
    """Wait until the page that set `window.oldPage` is replaced by a loaded one. Mid-navigation
    WebDriver may answer any call with an error (Chromium's "Node ... does not belong to the
    document"), so those count as not yet."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    def loaded(driver: Any) -> bool:
        try:
            return bool(driver.execute_script(
                "return !window.oldPage && document.readyState === 'complete'"))  # fmt: skip
        except WebDriverException:
            return False

    WebDriverWait(browser, 20, poll_frequency=0.05).until(loaded)


def shoot(browser: Any, where: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = where / name
    browser.save_screenshot(str(path))
    assert path.stat().st_size > 1000
    with capsys.disabled():
        print(f"\n  web screenshot: {path}")


def test_a_three_agent_conversation_renders_in_order_with_each_copys_state(
    site: Site, browser: Any, screenshots: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.webdriver.common.by import By

    browser.get(f"{site.url}mail/{site.reply.id}")  # any message of the thread finds it
    messages = browser.find_elements(By.CSS_SELECTOR, "li.message")
    assert [m.get_attribute("data-from") for m in messages] == ["mayor", "dog"]
    assert [m.get_attribute("data-id") for m in messages] == [site.first.id, site.reply.id]
    assert texts(browser, "h1.subject") == ["Review the PR"]
    first, reply = messages
    assert first.find_element(By.CSS_SELECTOR, ".cc").text == "cat"
    states = {
        c.get_attribute("data-mailbox"): c.find_element(By.CSS_SELECTOR, ".state").text
        for c in first.find_elements(By.CSS_SELECTOR, "li.copy")
    }
    assert states == {"dog": "read", "cat": "unread"}
    copies = reply.find_elements(By.CSS_SELECTOR, "li.copy")
    assert [(c.get_attribute("data-mailbox"), c.get_attribute("data-archived")) for c in copies] \
        == [("mayor", "true")]  # fmt: skip
    assert "Re: Review the PR" in reply.text and "Looks good to me" in reply.text
    # The body's bead id is a link to that bead's page.
    link = first.find_element(By.CSS_SELECTOR, ".body a")
    assert link.text == site.task.id and link.get_attribute("href").endswith(
        f"/beads/{site.task.id}"
    )
    shoot(browser, screenshots, "conversation.png", capsys)


def test_script_in_a_subject_and_body_is_shown_as_text(site: Site, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    for path in (f"mail/{site.hostile.id}", "agents/dog", "search?q=owned"):
        browser.get(site.url + path)
        assert browser.title != "owned"
        assert not browser.find_elements(By.CSS_SELECTOR, "main script, main img")
        assert SCRIPT_SUBJECT in browser.find_element(By.ID, "page").text
        if path.startswith("mail/"):
            assert browser.find_element(By.CSS_SELECTOR, ".body").text == SCRIPT_BODY
    status, headers, html = fetch(f"{site.url}mail/{site.hostile.id}")
    assert status == 200 and "&lt;script&gt;" in html and "<script>document" not in html
    assert "script-src 'self'" in headers["Content-Security-Policy"]


def test_the_history_shows_a_field_level_diff_of_an_update(
    site: Site, browser: Any, screenshots: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.webdriver.common.by import By

    browser.get(site.url + "history")
    # The module's other tests may write to the shared store, in any order: the update is
    # found by its bead, not by its place at the top.
    commits = browser.find_elements(By.CSS_SELECTOR, "article.commit")
    messages = [commit.find_element(By.CSS_SELECTOR, ".message").text for commit in commits]
    found = [n for n, text in enumerate(messages) if f"bead update {site.task.id}" in text]
    assert found, messages
    update = commits[found[0]]
    rows = {
        r.get_attribute("data-field"): (
            r.find_element(By.CSS_SELECTOR, ".old").text,
            r.find_element(By.CSS_SELECTOR, ".new").text,
        )
        for r in update.find_elements(By.CSS_SELECTOR, "tr[data-field]")
    }
    assert rows["title"] == ("Fix the build", "Fix the build now")
    assert rows["labels"] == ("[]", "ci")
    assert rows["meta.owner"] == ("", "dog")
    assert "body" not in rows and "from" not in rows  # only what changed
    shoot(browser, screenshots, "history.png", capsys)
    # The bead's own page: its two commits, newest first.
    browser.get(f"{site.url}beads/{site.task.id}")
    actions = texts(browser, "article.commit .action")
    assert actions == ["CHANGED", "CREATED"]


def test_open_pages_follow_the_store_without_a_reload(site: Site, browser: Any) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(site.url + "agents/eve")
    browser.execute_script("window.stillHere = true")
    assert "Live news" not in browser.find_element(By.ID, "page").text
    BeadMail(site.open("dog")).send("dog", "eve", "Live news", "fresh")
    # The page's live update replaces #page: an element found just before may be gone when
    # its text is read, so a stale one is looked up again. The deadline only bounds a hang.
    waiting = WebDriverWait(browser, 60, poll_frequency=0.05,
                            ignored_exceptions=(StaleElementReferenceException,))  # fmt: skip
    waiting.until(lambda b: "Live news" in b.find_element(By.ID, "page").text)
    assert browser.execute_script("return window.stillHere") is True


@contextlib.contextmanager
def served(store: Store, host: str = "127.0.0.1", token: str | None = None) -> Iterator[str]:
    """`store` served on a free port while the block runs: its URL, on 127.0.0.1."""
    server = serve(store, host, 0, token)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.port}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_page_opened_with_its_token_drops_it_from_the_address_for_a_cookie(
    tmp_path: Path, store_template: Path, browser: Any
) -> None:
    # The printed URL's `?token=` stayed in the address bar, so in the browser's history and
    # in any link copied from it: the page is now a redirect to the address without it,
    # which sets the cookie the page then loads by.
    from selenium.webdriver.common.by import By

    copy_store(store_template, tmp_path / ".beads")  # a new store (a copy of an init)
    token = "t" * 32
    with Store.open(tmp_path, agent="mayor") as store, served(store, "0.0.0.0", token) as url:
        status, headers, _ = fetch(f"{url}agents/dog?box=unread&token={token}&page=1",
                                   follow=False)  # fmt: skip
        assert status in (302, 303), status
        assert headers["Location"] == "/agents/dog?box=unread&page=1"
        cookie = headers["Set-Cookie"]
        assert f"gc-web-token={token}" in cookie and "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        status, _, page = fetch(url + headers["Location"][1:],
                                headers={"Cookie": f"gc-web-token={token}"})  # fmt: skip
        assert status == 200 and 'data-view="mailbox"' in page
        assert fetch(f"{url}?token={token}", follow=False)[1]["Location"] == "/"
        # A wrong token is refused, not redirected; a JSON client is answered as before.
        assert fetch(f"{url}?token=wrong", follow=False)[0] == 401
        for path, headers in (
            (f"history.json?token={token}", {}),
            (f"?token={token}", {"Accept": "application/json"}),
            ("history.json", {"Authorization": f"Bearer {token}"}),
        ):
            status, _, text = fetch(url + path, headers=headers, follow=False)
            assert status == 200 and json.loads(text)["ok"] is True, (path, text)
        # In a browser: the page loads, and the address shown has no token.
        browser.get(f"{url}agents/dog?token={token}")
        assert browser.current_url == f"{url}agents/dog"
        assert browser.find_element(By.TAG_NAME, "h1").text == "Mailbox of dog"


RLO_SUBJECT = "abc\u202egpj.exe"  # shows as "abcexe.jpg" when the override acts
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def visual_order(browser: Any, selector: str, first: str, last: str) -> bool:
    """Whether, in the element `selector`, the character `first` is drawn left of `last`
    (each the first of its kind in a text node of the element holding both)."""
    return browser.execute_script(
        """
        const [selector, first, last] = arguments;
        const element = document.querySelector(selector);
        const walk = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
        const left = (char) => {
          walk.currentNode = element;
          for (let node = walk.nextNode(); node; node = walk.nextNode()) {
            const at = node.data.indexOf(char);
            if (at >= 0) {
              const range = document.createRange();
              range.setStart(node, at);
              range.setEnd(node, at + 1);
              return range.getBoundingClientRect().left;
            }
          }
          throw new Error("no " + char + " in " + selector);
        };
        return left(first) < left(last);
        """,
        selector,
        first,
        last,
    )


def test_bidi_controls_in_stored_text_are_shown_and_reorder_nothing_around_them(
    tmp_path: Path, store_template: Path, browser: Any
) -> None:
    # A subject "abc<U+202E>gpj.exe" read as "abcexe.jpg", and an override left open reorders
    # the rest of its line too (the artifact's kind and size after its path): each piece of
    # stored text is now isolated (<bdi>) and its bidi controls shown as `<U+202E>`.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    copy_store(store_template, tmp_path / ".beads")  # a new store (a copy of an init)
    with Store.open(tmp_path, agent="mayor") as store, served(store) as url:
        mail = BeadMail(store)
        sent = mail.send("mayor", "dog", RLO_SUBJECT, f"every one: {BIDI_CONTROLS}.")
        work, _ = Threads(store).send(
            "mayor", to="dog", subject=RLO_SUBJECT, body="spec",
            artifacts=[{"path": "abc\u202egpj.exe", "kind": "file", "size": 12}],
        )  # fmt: skip
        assert store.get(sent.id).title == RLO_SUBJECT  # the store keeps the text as given
        # As served: no bidi control is left raw on any page that shows one, and each
        # shows as its escape inside an isolate.
        for path in (f"mail/{sent.id}", "agents/dog", "search?q=abc", f"beads/{sent.id}",
                     "history", f"work/{work.thread_id}", "work"):  # fmt: skip
            status, _, html = fetch(url + path)
            assert status == 200, path
            assert not any(char in html for char in BIDI_CONTROLS), path
            assert re.search(r'<bdi>abc<span class="bidi"[^>]*>&lt;U\+202E&gt;</span>gpj\.exe',
                             html), path  # fmt: skip
        html = fetch(f"{url}mail/{sent.id}")[2]
        for char in BIDI_CONTROLS:
            assert f"&lt;U+{ord(char):04X}&gt;" in html
        # In the browser: "gpj.exe" reads in its own order, and so does what follows the
        # artifact's path on its line.
        browser.get(f"{url}mail/{sent.id}")
        assert browser.find_element(By.CSS_SELECTOR, "h1.subject").text == "abc<U+202E>gpj.exe"
        assert visual_order(browser, "h1.subject", "g", "x")
        browser.get(f"{url}work/{work.thread_id}")
        assert visual_order(browser, "ul.artifacts li", "(", ")")
        assert visual_order(browser, "ul.artifacts li", "(", "y")  # "(file), 12 bytes"
        # A live update of an open page isolates and escapes as the page served did.
        browser.get(url + "agents/eve")
        with Store.open(tmp_path, agent="dog") as dog:
            BeadMail(dog).send("dog", "eve", RLO_SUBJECT, "x")
        WebDriverWait(browser, 60, poll_frequency=0.05).until(
            lambda b: b.find_elements(By.CSS_SELECTOR, "table.mailbox bdi .bidi")
        )
        row = browser.find_element(By.CSS_SELECTOR, "table.mailbox tbody tr")
        cells = row.find_elements(By.TAG_NAME, "td")
        assert [c.text for c in cells[1:4]] == ["dog", "abc<U+202E>gpj.exe", "eve"]
        assert visual_order(browser, "table.mailbox tbody tr td:nth-child(3)", "g", "x")
        assert "\u202e" not in browser.find_element(By.ID, "page").text


def test_a_search_holding_a_bidi_control_keeps_it_in_the_box_and_finds_the_same_again(
    tmp_path: Path, store_template: Path, browser: Any
) -> None:
    # The box showed the query's U+202E as the text "<U+202E>" (the escape stored text gets),
    # so searching again from it looked for "abc U 202E gpj" and found nothing. An input's
    # value is drawn in the box alone: its controls reorder nothing outside it.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    copy_store(store_template, tmp_path / ".beads")  # a new store (a copy of an init)
    query = "abc\u202egpj"
    with Store.open(tmp_path, agent="mayor") as store, served(store) as url:
        sent = BeadMail(store).send("mayor", "dog", RLO_SUBJECT, "x")

        def found(text: str) -> list[str]:
            answer = fetch(f"{url}search.json?q={quote(text)}")[2]
            return [b["id"] for b in json.loads(answer)["beads"]]

        # Over HTTP: the box's value attribute is the query, which finds what it found.
        page = fetch(f"{url}search?q={quote(query)}")[2]
        value = re.search(r'<input type="search" name="q" value="([^"]*)"', page)
        assert value is not None and unescape(value.group(1)) == query
        assert found(unescape(value.group(1))) == found(query) == [sent.id]
        # In the browser: Enter in the box asks again for the same query and the same beads.
        browser.get(f"{url}search?q={quote(query)}")
        for _ in range(2):
            box = browser.find_element(By.NAME, "q")
            assert box.get_property("value") == query
            assert [r.get_attribute("data-id") for r in browser.find_elements(
                By.CSS_SELECTOR, "table.results tbody tr")] == [sent.id]  # fmt: skip
            assert parse_qs(urlsplit(browser.current_url).query)["q"] == [query]
            browser.execute_script("window.oldPage = true")
            box.send_keys(Keys.ENTER)
            wait_for_a_new_page(browser)
        # What follows the box on its line reads in its own order.
        browser.execute_script(
            "document.querySelector('form[role=search]')"
            ".insertAdjacentHTML('beforeend', '<span>(after)</span>')"
        )
        assert visual_order(browser, "form[role=search]", "(", ")")


def test_a_pages_title_writes_a_bidi_control_out_and_adds_no_invisible_character(
    tmp_path: Path, store_template: Path, browser: Any
) -> None:
    # The title wrapped the page's name in U+2068 and U+2069 (a <title> holds no <bdi>):
    # two invisible characters in every tab, bookmark and copied title. Now it is plain
    # text, each bidi control written out as the page shows it.
    copy_store(store_template, tmp_path / ".beads")  # a new store (a copy of an init)
    with Store.open(tmp_path, agent="mayor") as store, served(store) as url:
        sent = BeadMail(store).send("mayor", "dog", RLO_SUBJECT, "x")
        work, _ = Threads(store).send("mayor", to="dog", subject=RLO_SUBJECT, body="spec")
        for path, title in (
            (f"mail/{sent.id}", "abc<U+202E>gpj.exe · gc web"),
            (f"work/{work.thread_id}", "abc<U+202E>gpj.exe · gc web"),
            (f"beads/{sent.id}", f"{sent.id} · gc web"),
            (f"search?q={quote(RLO_SUBJECT)}", "Search · gc web"),
        ):
            browser.get(url + path)
            assert browser.title == title, path
            assert not [c for c in browser.title if unicodedata.category(c) == "Cf"], path


# -- over HTTP -------------------------------------------------------------------------------


def test_every_page_has_a_json_twin_in_the_clis_shapes(site: Site, gc: GcRunner) -> None:
    beads_dir = ("--beads-dir", str(site.root))
    thread = get_json(site, f"mail/{site.first.id}")
    assert thread["ok"] is True and thread["view"] == "conversation"
    cli = gc.json("mail", "thread", site.first.id, *beads_dir)["messages"]
    assert [{k: m[k] for k in cli[0]} for m in thread["messages"]] == cli
    assert [m["archived"] for m in thread["messages"]] == [False, False, True]
    assert get_json(site, f"mail/{site.first.id}.json") == thread  # the suffix is the same

    box = get_json(site, "agents/dog?box=unread")
    unread = gc.json("mail", "inbox", "dog", *beads_dir)["messages"]
    assert sorted(m["id"] for m in box["messages"]) == sorted(m["id"] for m in unread)
    count = gc.json("mail", "count", "dog", *beads_dir)
    assert (box["total"], box["unread"]) == (count["total"], count["unread"]) == (3, 2)

    work = get_json(site, f"work/{site.work.thread_id}")
    shown = gc.json("thread", "show", site.work.thread_id, *beads_dir)
    assert work["messages"] == shown["messages"]
    assert work["thread"]["status"] == "claimed" and work["thread"]["lease"]["agent"] == "dog"
    assert get_json(site, "work")["threads"][0]["thread_id"] == site.work.thread_id

    gates = get_json(site, "gates")["beads"]
    assert gates == gc.json("gate", "list", *beads_dir)["beads"]
    decisions = get_json(site, "decisions")["beads"]
    assert [d["id"] for d in decisions] == [site.decision.id]

    agents = {a["agent"]: a for a in get_json(site, "")["agents"]}
    assert (agents["cat"]["unread"], agents["mayor"]["total"]) == (1, 0)
    assert [s["session"] for s in agents["dog"]["sessions"]] == ["session-of-dog"]
    assert agents["dog"]["last_activity"] >= agents["dog"]["sessions"][0]["last_hook_at"]

    bead = get_json(site, f"beads/{site.task.id}")
    assert bead["bead"] == gc.json("bead", "show", site.task.id, *beads_dir)["bead"]
    history = get_json(site, "history")
    log = gc.json("log", *beads_dir)["commits"]
    assert [{k: c[k] for k in log[0]} for c in history["commits"]] == log[:20]


def test_errors_are_the_clis_error_shape(site: Site) -> None:
    status, _, text = fetch(site.url + "mail/gc-zzzzzzzz.json")
    assert status == 404 and json.loads(text)["error"]["code"] == "not_found"
    status, _, text = fetch(site.url + "agents/dog.json?page=0")
    assert status == 400 and json.loads(text)["error"]["code"] == "invalid_input"
    status, _, text = fetch(site.url + "history?from=nonsense")
    assert status == 400 and "expected a commit id" in text


def test_the_history_starts_from_a_short_commit_id_as_gc_log_prints_it(
    site: Site, gc: GcRunner
) -> None:
    # `/history?from=4e5c56e747` (the id `gc log` shows) answered "not a commit id".
    beads_dir = ("--beads-dir", str(site.root))
    short = gc("log", *beads_dir).stdout.splitlines()[1].split()[0]
    whole = gc.json("log", *beads_dir)["commits"][1]["commit"]
    assert len(short) == 10 and whole.startswith(short)
    assert get_json(site, f"history?from={short}")["commits"][0]["commit"] == whole
    assert get_json(site, f"history?from={short.upper()}")["commits"][0]["commit"] == whole
    # A bead's page too, from a commit of its own `gc log ID`.
    short = gc("log", site.task.id, *beads_dir).stdout.splitlines()[1].split()[0]
    whole = gc.json("log", site.task.id, *beads_dir)["commits"][1]["commit"]
    bead = get_json(site, f"beads/{site.task.id}?from={short}")
    assert [c["commit"] for c in bead["commits"]] == [whole]
    # No such commit: a 404 naming it; no commit id at all: a 400 saying what is expected.
    status, _, text = fetch(site.url + "history.json?from=0000000000")
    assert status == 404 and json.loads(text)["error"]["message"] == (
        "no commit 0000000000 in the branch's history"
    )
    status, _, text = fetch(site.url + "history.json?from=4e5")
    assert status == 400 and "4 to 40 hex digits" in json.loads(text)["error"]["message"]


def test_a_query_parameter_a_page_does_not_take_as_given_is_refused_in_one_line(
    site: Site,
) -> None:
    # `/history?page=-1` answered 200 (the history pages by `from`), and `/gates?all=maybe`
    # was taken for `all=1`; of a parameter given twice, the second was dropped unsaid.
    for path, given, said in (
        ("history", "page=-1", "?from="),
        ("history", "page=0", "?from="),
        ("history", "page=2", "?from="),
        (f"beads/{site.task.id}", "page=2", "?from="),
        ("gates", "all=maybe", "all must be one of"),
        ("decisions", "all=2", "all must be one of"),
        ("gates", "all=0&all=1", "'all' 2 times"),
        ("search", "q=a&q=b", "'q' 2 times"),
    ):
        status, headers, text = fetch(f"{site.url}{path}.json?{given}")
        assert status == 400, (path, given, text)
        assert headers["Content-Type"] == "application/json"
        error = json.loads(text)["error"]
        assert error["code"] == "invalid_input" and said in error["message"], error
        status, headers, text = fetch(f"{site.url}{path}?{given}")  # the page: a short page
        assert status == 400 and said in unescape(text), text
    for given in ("all=1", "all=true", "all=TRUE", "all=Yes", "all=0", "all=No", "all=no", ""):
        assert fetch(f"{site.url}gates?{given}")[0] == 200, given
    closed = get_json(site, "decisions?all=no")["beads"]
    assert closed == get_json(site, "decisions")["beads"]


def test_search_is_served_by_the_index_and_follows_every_write(site: Site, gc: GcRunner) -> None:
    def found(words: str) -> list[str]:
        return [b["id"] for b in get_json(site, f"search?q={words}")["beads"]]

    assert found("revi") == [site.reply.id, site.cat_copy.id, site.first.id]  # newest first
    assert found("cat+review") == [site.cat_copy.id, site.first.id]  # agents (cc) too
    assert found("ci") == [site.task.id]  # labels
    assert found("now+build") == [site.task.id]  # every word
    bead = site.store.create("task", "Zanzibar", "lorem", labels=["faraway"])
    assert found("zanzibar") == found("faraway") == found("lorem") == [bead.id]
    site.store.update(bead.id, title="Timbuktu")
    assert found("zanzibar") == [] and found("timbuktu") == [bead.id]
    assert gc("doctor", "--rebuild-index", "--beads-dir", str(site.root)).returncode == 0
    assert found("timbuktu") == [bead.id] and found("zanzibar") == []
    status, _, text = fetch(site.url + 'search.json?q="*"')
    assert status == 400 and "no words" in text


def test_a_message_from_another_machine_says_so_on_its_pages(gc_store: GcRunner) -> None:
    # The first machine id's commits stand for another machine's (as after a sync); the
    # store then takes an id of its own, as a copy of a store does.
    assert gc_store("config", "set", "--local", "delivery.nats.machine", "build-01").returncode == 0
    sent = gc_store.json("mail", "send", "dog", "-s", "From afar", "-m", "b")["message"]
    there, note = sent["id"], f"(from {sent['from']} on build-01)"
    git_config = ["git", "--git-dir", str(gc_store.cwd / ".beads" / ".git"), "config"]
    subprocess.run([*git_config, "machine.id", "m-00000000000000aa"], check=True)
    here = gc_store.json("mail", "send", "dog", "-s", "From here", "-m", "a")["message"]["id"]
    store = Store.open(gc_store.cwd, agent="mayor")
    server = serve(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = url_of(server)
        box = json.loads(fetch(url + "agents/dog.json")[2])["messages"]
        assert {m["id"]: m["origin"] for m in box} == {there: note, here: None}
        assert note in unescape(fetch(url + f"mail/{there}")[2])
        assert "build-01" not in fetch(url + f"mail/{here}")[2]
    finally:
        server.shutdown()
        server.server_close()
        store.close()


def test_pages_walk_the_history_for_origins_only_once_while_it_stays(
    gc_store: GcRunner, origin_walks: list[bytes | None]
) -> None:
    # Every open page reloads at each commit (`/head`): each load of a mailbox, conversation
    # or work thread walked the whole history for where its messages came from.
    assert gc_store("config", "set", "--local", "delivery.nats.machine", "build-01").returncode == 0
    sent = gc_store.json("mail", "send", "dog", "-s", "From afar", "-m", "b")["message"]
    thread = gc_store.json("thread", "send", "--from", "mayor", "--to", "dog", "--subject",
                           "DB?", "--summary", "which")["thread"]["thread_id"]  # fmt: skip
    note = f"(from {sent['from']} on build-01)"
    git_config = ["git", "--git-dir", str(gc_store.cwd / ".beads" / ".git"), "config"]
    subprocess.run([*git_config, "machine.id", "m-00000000000000aa"], check=True)
    walks = origin_walks
    store = Store.open(gc_store.cwd, agent="mayor")
    server = serve(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def origins() -> list[str | None]:
        box = json.loads(fetch(url + "agents/dog.json")[2])["messages"]
        talk = json.loads(fetch(url + f"mail/{sent['id']}.json")[2])["messages"]
        work = json.loads(fetch(url + f"work/{thread}.json")[2])["messages"]
        return [m["origin"] for m in [*box, *talk, *work]]

    try:
        url = url_of(server)
        first = origins()
        assert first.count(note) == 2 and "(from mayor on build-01)" in first
        walked = len(walks)
        assert origins() == first and len(walks) == walked  # the branch stayed: no walk
        gc_store("mail", "send", "cat", "-s", "Later", "-m", "c")
        store.refresh()
        assert origins() == first
        assert None not in walks[walked:]  # only the new commit walked, never the whole history
    finally:
        server.shutdown()
        server.server_close()
        store.close()


def test_lists_come_in_pages(tmp_path: Path, store_template: Path) -> None:
    copy_store(store_template, tmp_path / ".beads")  # a new store (a copy of an init)
    store = Store.open(tmp_path, agent="mayor")
    with store.batch() as batch:
        for n in range(60):
            batch.create("message", f"note {n}", "", assignee="dog", meta={"read": False})
    server = serve(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = url_of(server)
        first = json.loads(fetch(url + "agents/dog.json")[2])
        second = json.loads(fetch(url + "agents/dog.json?page=2")[2])
        assert (len(first["messages"]), first["more"]) == (50, True)
        assert (len(second["messages"]), second["more"]) == (10, False)
        assert first["messages"][0]["subject"] == "note 59"  # newest first
        assert first["total"] == first["unread"] == 60
        assert 'rel="next"' in fetch(url + "agents/dog")[2]
    finally:
        server.shutdown()
        server.server_close()
        store.close()


def test_every_page_the_site_links_to_answers_a_pool_tasks_message_included(
    tmp_path: Path, store_template: Path
) -> None:
    # A work-thread task sent to no one in particular (any agent of the pool may claim it)
    # is a message bead with no mailbox: its conversation page answered 500.
    copy_store(store_template, tmp_path / ".beads")  # a new store (a copy of an init)
    store = Store.open(tmp_path, agent="mayor")
    _work, task = Threads(store).send("mayor", to=None, subject="Pool task", body="anyone")
    server = serve(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = url_of(server).rstrip("/")
        seen: dict[str, int] = {}
        waiting = ["/", "/work"]
        while waiting and len(seen) < 300:
            path = waiting.pop()
            if path in seen:
                continue
            status, _headers, text = fetch(url + path)
            seen[path] = status
            if status == 200:
                waiting += [
                    link
                    for link in re.findall(r'href="(/[^"#]*)"', text)
                    if not link.startswith("/static/") and link not in seen
                ]
        assert f"/mail/{task.message_id}" in seen
        assert {path: code for path, code in seen.items() if code != 200} == {}
        page = fetch(f"{url}/mail/{task.message_id}")[2]
        assert "anyone (a pool task)" in page
    finally:
        server.shutdown()
        server.server_close()
        store.close()


def test_loopback_answers_only_to_localhost_names(site: Site) -> None:
    port = site.server.port
    for host in ("evil.example", f"evil.example:{port}", "192.168.1.9", "localhost.evil.example"):
        status, _, text = fetch(site.url, headers={"Host": host})
        assert status == 403 and "not this machine" in text
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "app.localhost"):
        assert fetch(site.url, headers={"Host": host})[0] == 200


def test_a_client_that_goes_silent_is_let_go_and_others_are_answered(store: Store) -> None:
    # Each connection holds a thread of the server while it waits: thousands of silent ones
    # (a slow-loris) held thousands of threads for as long as they stayed open.
    import socket

    server = serve(store, idle_timeout=0.5)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as silent:
            silent.sendall(b"G")  # the start of a request, and then nothing
            assert fetch(url_of(server))[0] == 200  # the others are answered meanwhile
            closed = b""
            while chunk := silent.recv(4096):  # until the server closes it (30 s bound a hang)
                closed += chunk
            assert b"Traceback" not in closed
    finally:
        server.shutdown()
        server.server_close()


def test_a_request_the_http_layer_cannot_read_is_refused_in_plain_text(site: Site) -> None:
    import socket

    def send(request: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", site.server.port), timeout=30) as client:
            client.sendall(request)
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
        return answer

    for request in (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",  # 414
                    b"GET / HTTP/1.1\r\nX: " + b"b" * 70000 + b"\r\n\r\n"):  # 431  # fmt: skip
        head, _, body = send(request).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.") and b" 4" in head.split(b"\r\n")[0], head
        assert b"Content-Type: text/plain; charset=utf-8" in head, head
        assert body.count(b"\n") == 1 and b"<" not in body, body
    # A line that is no HTTP/1.x request is answered as HTTP/0.9 is: the body alone, plain.
    answer = send(b"GET /a <b>x</b> c d\r\n\r\n")
    assert answer.startswith(b"400 ") and b"<html" not in answer.lower(), answer


@pytest.mark.gc_process
def test_off_loopback_no_request_succeeds_without_the_token(
    tmp_path: Path, store_template: Path
) -> None:
    copy_store(store_template, tmp_path / ".beads")  # a new store (a copy of an init)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GC_")}
    program = [gc_program(), "web", "--host", "0.0.0.0", "--json"]
    server = subprocess.Popen(program, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        started = json.loads(server.stdout.readline())  # type: ignore[union-attr]
        token = started["token"]
        assert len(token) >= 24 and started["url"].endswith(f"/?token={token}")
        # Said on stderr at start (waited for with a deadline: a server that says nothing
        # would keep a bare readline waiting for good).
        assert select.select([server.stderr], [], [], 30)[0], "nothing said on stderr"
        said = server.stderr.readline()  # type: ignore[union-attr]
        assert said.startswith("gc web: 0.0.0.0 is not a loopback address, so the site needs the ")
        assert token in said and started["url"] in said
        base = f"http://127.0.0.1:{started['port']}/"
        for path in ("", "agents/mayor", "history.json", "head", "static/style.css", "nope"):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Cookie": "gc-web-token=x"}):
                status, _, _ = fetch(base + path, headers=headers)
                assert status == 401, (path, headers)
            assert fetch(base + path + "?token=wrong")[0] == 401
        status, headers, _ = fetch(f"{base}?token={token}", follow=False)
        assert status == 303 and "HttpOnly" in headers["Set-Cookie"]
        for scheme in ("Bearer", "bearer"):  # a scheme's case is free (RFC 9110)
            authorized = {"Authorization": f"{scheme} {token}"}
            assert fetch(base + "history.json", headers=authorized)[0] == 200
        assert fetch(base, headers={"Cookie": f"gc-web-token={token}"})[0] == 200
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0  # bounds a hang only
    assert token not in server.stderr.read()  # type: ignore[union-attr]  # said once


def test_a_token_shorter_than_16_characters_is_refused_in_one_line(gc_store: GcRunner) -> None:
    gc = gc_store  # in a store as `gc init` makes it

    def served(self: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the token was accepted: the site is served")

    # In this process, where a token accepted would serve until stopped: serving fails the
    # command instead.
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(BaseWSGIServer, "serve_forever", served)
        for args in (["--host", "0.0.0.0", "--token", "a"], ["--token", "x" * 15], ["--token", ""]):
            result = gc("web", *args)
            assert result.returncode == 30, (args, result.stderr)
            assert "--token must be at least 16 characters" in result.stderr
            assert result.stderr.count("\n") == 1 and not result.stdout
    with Store.open(gc.cwd) as store:
        with pytest.raises(InvalidInput, match="at least 16"):
            serve(store, "0.0.0.0", 0, "a" * 15)
        server = serve(store, "127.0.0.1", 0, "a" * 16)  # long enough: served
        try:
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            url = f"http://127.0.0.1:{server.port}/head"
            assert fetch(url)[0] == 401
            assert fetch(url, headers={"Authorization": "Bearer " + "a" * 16})[0] == 200
        finally:
            server.shutdown()
            server.server_close()


def test_gc_web_refuses_what_it_cannot_serve_in_one_line(gc_store: GcRunner) -> None:
    gc = gc_store  # in a store as `gc init` makes it
    for args, says in (
        (["--port", "70000"], "70000 is not in the range"),
        (["--host", "192.0.2.1"], "cannot listen on 192.0.2.1:0"),
    ):
        result = gc("web", *args)
        assert result.returncode == 30 and says in result.stderr
        assert result.stderr.count("\n") == 1 and not result.stdout


def test_gc_web_without_the_extra_says_how_to_install_it(
    gc_store: GcRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    gc = gc_store  # in a store as `gc init` makes it
    monkeypatch.setitem(sys.modules, "flask", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "web.app", raising=False)
    result = gc("web")
    assert result.returncode == 30
    assert result.stderr == (
        "gc: gc web needs the web extra: pip install 'gc-beads[web]' (from a checkout: '.[web]')\n"
    )


def test_the_site_changes_nothing(site: Site) -> None:
    head = site.store.git.head()
    for path in ("", "agents/dog", f"mail/{site.first.id}", "history", "search?q=x"):
        assert fetch(site.url + path)[0] == 200
    assert site.store.git.head() == head  # reading marks nothing read, commits nothing
    request = urllib.request.Request(f"{site.url}mail/{site.first.id}", data=b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 405


def test_a_page_number_that_is_no_plain_number_is_refused_in_one_line(site: Site) -> None:
    # A superscript digit passes str.isdigit but not int(), and a number of thousands of
    # digits passes both checks' first half but int() refuses it: each answered 500.
    for given in ("%C2%B2", "9" * 5000, "%EF%BC%91", "1.0", "+1", "", "0x1"):
        for path in ("", "agents/dog", "search", "work"):
            status, headers, text = fetch(f"{site.url}{path}.json?q=x&page={given}")
            assert status == 400, (path, given, text)
            assert headers["Content-Type"] == "application/json"
            assert json.loads(text)["error"]["code"] == "invalid_input"
            assert "page must be a number from 1" in text and len(text) < 300
    assert fetch(site.url + "?page=2")[0] == 200  # a plain one still serves


def test_a_loopback_address_other_than_127_0_0_1_is_answered_by_its_own_url(
    tmp_path: Path, store_template: Path
) -> None:
    # `gc web --host 127.0.0.2` printed http://127.0.0.2:PORT/, which then answered 403
    # "not this machine": only 127.0.0.1 was taken for a loopback Host.
    copy_store(store_template, tmp_path / ".beads")  # a new store (a copy of an init)
    with Store.open(tmp_path, agent="mayor") as store:
        server = serve(store, "127.0.0.2")
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = url_of(server)
            assert url.startswith("http://127.0.0.2:")
            assert fetch(url)[0] == 200
            for host in ("127.9.9.9", "[0:0:0:0:0:0:0:1]", f"127.0.0.2:{server.port}"):
                assert fetch(url, headers={"Host": host})[0] == 200, host
            # Still refused: names that are not this machine, and addresses off loopback.
            for host in ("10.0.0.1", "[::ffff:10.0.0.1]", "127.0.0.1.evil.example", "[::2]"):
                assert fetch(url, headers={"Host": host})[0] == 403, host
        finally:
            server.shutdown()
            server.server_close()


def test_a_path_the_site_has_not_is_answered_in_the_sites_error_shape(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    # werkzeug's own pages answered these: HTML to a JSON client, without the site's layout.
    status, headers, text = fetch(site.url + "nope.json")
    assert status == 404 and headers["Content-Type"] == "application/json"
    assert json.loads(text) == {
        "ok": False,
        "error": {"code": "not_found", "message": "no page /nope"},
    }
    status, _, text = fetch(site.url + "<script>x</script>")
    assert status == 404 and "no page /&lt;script&gt;x&lt;/script&gt;" in text
    assert "<script>x" not in text
    request = urllib.request.Request(site.url + "head.json", data=b"", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 405
    assert json.loads(refused.value.read())["error"]["code"] == "invalid_input"
    assert refused.value.headers["Allow"]  # the methods it takes, as HTTP says
    status, _, text = fetch(site.url + "x" * 20000 + ".json")
    assert status == 404 and len(text) < 300  # the path is named cut short
    # A failure that is a bug: a 500 in the same shape, no traceback, and the site goes on.
    monkeypatch.setattr(web.data, "agents", lambda *args: 1 / 0)
    status, headers, text = fetch(site.url + ".json")
    assert status == 500 and headers["Content-Type"] == "application/json"
    assert json.loads(text)["error"]["code"] == "internal_error"
    assert "Traceback" not in text and "ZeroDivision" not in text
    assert fetch(site.url + "work")[0] == 200
