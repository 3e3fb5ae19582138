"""The `gc web` site: a Flask app over one store, served by werkzeug's threaded server.

Read-only, server-rendered (Jinja2, autoescaped: mail is untrusted input), each page with a
JSON twin (`.json` after the path, or `Accept: application/json`) holding what `web.data`
returns. Pages update themselves when the branch moves: `static/live.js` polls `/head` (the
ref file's commit, read without the index) every second while the page is visible, and
fetches the page again when it differs from the commit the page was made from. A poll, not a
stream: each open stream would hold one of the six connections a browser allows a host.

Who may ask: bound to loopback with no token, only requests naming a localhost host (a page
of another site cannot read the store through DNS rebinding); with a token (required on any
other address), every request carries it (`?token=`, which also sets a cookie, or
`Authorization: Bearer`). A page asked for with `?token=` is a redirect to its address
without it, which sets the cookie: the token leaves the address bar and the browser's history.
A token is compared in constant time (`hmac.compare_digest`) and must be at least `MIN_TOKEN`
characters: it guards the store's whole history from the network.

Stored text is shown isolated (each value in a `<bdi>`, through the `shown` filter) with its
bidi controls written out (`<U+202E>`): a right-to-left override in a subject neither
reorders the subject nor spills onto what follows it on the line. The page's title is plain
text with the controls written out the same way. The search box alone holds its query as
typed, controls and all: a field's value is drawn inside the field, and must search again for
the same text.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
import socket
import threading
import unicodedata
import weakref
from typing import Any
from urllib.parse import quote, urlencode

from flask import Flask, Response, redirect, render_template, request, url_for
from markupsafe import Markup, escape
from werkzeug.exceptions import HTTPException
from werkzeug.serving import (
    BaseWSGIServer,
    WSGIRequestHandler,
    get_sockaddr,
    make_server,
    select_address_family,
)

from beads.charclass import BIDI_CONTROLS
from beads.errors import GcError, InvalidInput, NotFound
from beads.index.reader import branch_head
from beads.records.ids import ID_RE
from beads.store import Store
from inbox.delivery import Delivery
from web import data
from web.history import commit_id, history

TOKEN_COOKIE = "gc-web-token"
MIN_TOKEN = 16  # characters; `gc web` makes 32 (`secrets.token_urlsafe(24)`)
LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]")
# Seconds a connection may wait for the client's next bytes: an idle or slow client holds a
# thread of the server, so thousands of them would otherwise hold thousands for good.
IDLE_TIMEOUT = 30.0
# Beads ids in text, linked when they name a bead of the store.
_ID_IN_TEXT = re.compile(rf"(?<![\w-])({ID_RE.pattern})(?![\w-])")
_PAGE_RE = re.compile(r"[0-9]{1,7}")
# `?all=` on the gates and decisions: its values, and whether each lists the closed beads.
_ALL_VALUES = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
_HTTP_STATUS = {30: 400, 40: 404, 20: 409, 130: 503}
_SECURITY_HEADERS = {
    # Defence in depth behind the escaping: no inline script, nothing from elsewhere.
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the token may be in the URL
}
# What reorders the text around it: shown as escapes, never raw.
BIDI_CONTROL = re.compile(f"[{BIDI_CONTROLS}]")


def is_loopback(host: str) -> bool:
    """Whether binding `host` serves this machine only."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def create_app(store: Store, *, token: str | None = None, loopback: bool = True) -> Flask:
    """The site over `store`; `token`, when set, is required of every request; `loopback`
    checks the Host header instead when no token is set."""
    app = Flask(__name__)
    # Before the first template compiles (the environment is made on first use).
    app.jinja_options = {**app.jinja_options, "finalize": _finalize}
    app.json.sort_keys = False  # type: ignore[attr-defined]  # fields in the CLI's order
    delivery = Delivery(store.root, config=lambda: store.config)
    weakref.finalize(app, delivery.close)
    # One store and one delivery database for the whole process: requests take turns (the
    # pages are quick; `/head`, polled by every open page, reads a file and takes no turn).
    lock = threading.Lock()
    original_wsgi = app.wsgi_app

    def json_suffix(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path.endswith(".json"):
            environ["PATH_INFO"] = path[: -len(".json")]
            environ["gc.json"] = True
        return original_wsgi(environ, start_response)

    app.wsgi_app = json_suffix  # type: ignore[method-assign]

    @app.before_request
    def guard() -> Response | None:
        if loopback and token is None and not _is_local(request.host):
            return _refusal(403, f"refused: Host {request.host!r} is not this machine")
        if token is not None and not _carries(token):
            return _refusal(401, "this site needs its token: open the URL gc web printed")
        if (
            token is not None
            and request.method in ("GET", "HEAD")
            and _token_in_query(token)
            and not _wants_json()
        ):
            # A page opened from the printed URL: the same page without the token, the
            # cookie (set by `headers`) carrying it from now on. JSON clients are answered.
            return redirect(_address_without_token(), 303)  # type: ignore[return-value]
        _each_parameter_once()
        return None

    @app.after_request
    def headers(response: Response) -> Response:
        response.headers.update(_SECURITY_HEADERS)
        if token is not None and _token_in_query(token):
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
        return response

    @app.errorhandler(GcError)
    def failed(error: GcError) -> Response:
        status = _HTTP_STATUS.get(error.exit_code, 500)
        return _refusal(status, error.message, error)

    @app.errorhandler(HTTPException)
    def refused(error: HTTPException) -> Response:
        # werkzeug's own refusals (no such page, a method other than GET, a failure with
        # no GcError) in the site's shape: JSON to a JSON client, else the site's page.
        status = error.code or 500
        if status == 404:
            problem: GcError = NotFound(f"no page {_cut(request.path)}")
        elif status >= 500:
            problem = GcError("internal error: the server's log says more")
        else:
            problem = InvalidInput(f"{status} {error.name}")
        response = _refusal(status, problem.message, problem)
        for name, given in error.get_headers():  # Allow on a 405, say; not its own type
            if name.lower() != "content-type":
                response.headers[name] = given
        return response

    @app.template_filter("linked")
    def linked(text: str) -> Markup:
        return _linked(store, text)

    @app.template_filter("value")
    def value(item: Any) -> Markup:
        return _shown(_value(item))

    @app.template_filter("shown")
    def shown(item: Any) -> Markup:
        # A macro's output is Markup already: shown as it is, not escaped again.
        return _shown(item if isinstance(item, str) else str(item))

    @app.template_filter("typed")
    def typed(text: str) -> Markup:
        # What the reader typed, back in its field as typed: escaped, its bidi controls kept
        # (a field's value is drawn inside the field alone, so they reorder nothing outside
        # it), so that submitting the field again asks for the same text.
        return escape(text)

    def page(name: str, template: str, payload: dict[str, Any], **extra: Any) -> Response:
        if _wants_json():
            return app.json.response({"ok": True, "view": name, **payload})
        head = store.index.head()  # the commit the data just read reflects
        html = render_template(
            template, view=name, head=head.decode() if head else "", **payload, **extra
        )
        return Response(html, mimetype="text/html")

    @app.get("/")
    def agents() -> Response:
        with lock:
            return page("agents", "agents.html", data.agents(store, delivery, _page()))

    @app.get("/agents/<path:name>")
    def mailbox(name: str) -> Response:
        with lock:
            box = request.args.get("box", "all")
            return page("mailbox", "mailbox.html", data.mailbox(store, name, box, _page()))

    @app.get("/mail/<ref>")
    def conversation(ref: str) -> Response:
        with lock:
            found = store.get(ref)
            if found.type != data.MESSAGE:  # a work thread, or any other bead: its own page
                where = "work_thread" if found.type == data.THREAD else "bead"
                return redirect(url_for(where, ref=found.id))  # type: ignore[return-value]
            payload = data.conversation(store, found, _page())
            return page(
                "conversation", "conversation.html", payload, sends=data.sends(payload["messages"])
            )

    @app.get("/work")
    def work_threads() -> Response:
        with lock:
            return page("work_threads", "work_threads.html", data.work_threads(store, _page()))

    @app.get("/work/<ref>")
    def work_thread(ref: str) -> Response:
        with lock:
            return page("work_thread", "work_thread.html", data.work_thread(store, ref))

    @app.get("/gates")
    def gates() -> Response:
        with lock:
            payload = data.beads_of_type(store, "gate", closed=_all(), page=_page())
            return page("gates", "gates.html", payload, closed=_all())

    @app.get("/decisions")
    def decisions() -> Response:
        with lock:
            payload = data.beads_of_type(store, "decision", closed=_all(), page=_page())
            return page("decisions", "decisions.html", payload, closed=_all())

    @app.get("/history")
    def timeline() -> Response:
        with lock:
            _no_page_number()
            start = request.args.get("from")
            payload = history(store, start=commit_id(store, start) if start else None)
            return page("history", "history.html", payload)

    @app.get("/beads/<ref>")
    def bead(ref: str) -> Response:
        with lock:
            _no_page_number()
            start = request.args.get("from")
            payload = data.bead(store, ref, commit_id(store, start) if start else None)
            return page("bead", "bead.html", payload)

    @app.get("/search")
    def search() -> Response:
        with lock:
            text = request.args.get("q", "").strip()
            if not text:
                empty = {"query": "", "beads": [], "page": 1, "more": False}
                return page("search", "search.html", empty)
            return page("search", "search.html", data.search(store, text, _page()))

    @app.get("/head")
    def branch() -> Response:
        # What `static/live.js` polls: the branch's commit, read from the ref file alone.
        commit = branch_head(store.root)
        return app.json.response({"head": commit.decode() if commit else ""})

    return app


def serve(
    store: Store,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    *,
    idle_timeout: float = IDLE_TIMEOUT,
) -> BaseWSGIServer:
    """A threaded server of the site, bound (its port chosen by the system when 0), not yet
    serving: call `serve_forever()`. A token is required off loopback, and a token shorter
    than `MIN_TOKEN` characters is refused (InvalidInput). A connection whose client sends
    nothing for `idle_timeout` seconds is closed."""
    check_token(token)
    loopback = is_loopback(host)
    if not loopback and not token:
        raise InvalidInput(f"serving on {host} (not loopback) needs a token")
    app = create_app(store, token=token, loopback=loopback)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    # werkzeug prints its own lines and exits when it cannot bind: try first, as it will.
    family = select_address_family(host, port)
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(get_sockaddr(host, port, family))
    except OSError as exc:
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None

    class Handler(WSGIRequestHandler):
        timeout = idle_timeout  # each read of the client's waits at most this long
        # What the HTTP layer answers by itself (a request line it cannot read, 414, 431):
        # plain text, as the site's own short errors, never an HTML page.
        error_content_type = "text/plain; charset=utf-8"
        error_message_format = "%(code)d %(message)s\n"

    return make_server(host, port, app, threaded=True, request_handler=Handler)


def check_token(token: str | None) -> None:
    """Refuse a token too short to guard the store (InvalidInput); None is no token."""
    if token is not None and len(token) < MIN_TOKEN:
        raise InvalidInput(
            f"--token must be at least {MIN_TOKEN} characters ({len(token)} given): it "
            "guards the store's whole history; leave it out and gc web makes one"
        )


def url_of(server: BaseWSGIServer, token: str | None = None) -> str:
    """The address to open in a browser (with the token, when one is set)."""
    host = server.host
    if ":" in host:
        host = f"[{host}]"
    elif host in ("0.0.0.0", ""):
        host = socket.gethostname()
    return f"http://{host}:{server.port}/" + (f"?token={token}" if token else "")


def _is_local(host: str) -> bool:
    """Whether a Host header names this machine (`localhost:8000`, `[::1]`, `x.localhost`,
    any loopback address: the URL of `--host 127.0.0.2` names it). A page of another site
    reached through DNS rebinding sends its own name, never an address."""
    host = host.lower()
    name = host[: host.find("]") + 1] if host.startswith("[") else host.partition(":")[0]
    if name in LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name[1:-1] if name.startswith("[") else name).is_loopback
    except ValueError:
        return False


def _carries(token: str) -> bool:
    """Whether this request carries `token` (query, bearer header or cookie)."""
    scheme, _, bearer = request.headers.get("Authorization", "").partition(" ")
    given = [
        request.args.get("token", ""),
        bearer.strip() if scheme.lower() == "bearer" else "",  # a scheme's case is free
        request.cookies.get(TOKEN_COOKIE, ""),
    ]
    return any(hmac.compare_digest(text.encode(), token.encode()) for text in given if text)


def _token_in_query(token: str) -> bool:
    """Whether this request's `?token=` is `token`."""
    given = request.args.get("token")
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


def _address_without_token() -> str:
    """This request's path and query without `token`: where a page opened with its token
    sends the browser. Always one path on this site (`//x` would name another host)."""
    path = quote(request.script_root + request.path, safe="/:@!$&'()*+,;=")
    kept = [(name, given) for name, given in request.args.items(multi=True) if name != "token"]
    return "/" + path.lstrip("/") + (f"?{urlencode(kept)}" if kept else "")


def _wants_json() -> bool:
    if request.environ.get("gc.json"):
        return True
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json"


def _refusal(status: int, message: str, error: GcError | None = None) -> Response:
    """An error as the CLI's `--json` shows one, or as a short page."""
    if _wants_json():
        shown = error.to_json() if error else {"code": "invalid_input", "message": message}
        body = {"ok": False, "error": shown}
        return Response(json.dumps(body), status=status, mimetype="application/json")
    html = render_template("error.html", status=status, message=message, view="error", head="")
    return Response(html, status=status, mimetype="text/html")


def _page() -> int:
    text = request.args.get("page", "1")
    # ASCII digits only, few of them: str.isdigit takes "²", which int() refuses, and int()
    # refuses thousands of digits.
    if not _PAGE_RE.fullmatch(text) or not 1 <= int(text) <= 1_000_000:
        raise InvalidInput(f"page must be a number from 1 to 1000000, not {_cut(text)!r}")
    return int(text)


def _cut(text: str, most: int = 80) -> str:
    """`text` for an error message: its first `most` characters (a URL may hold 64 KiB)."""
    return text if len(text) <= most else text[:most] + "..."


def _no_page_number() -> None:
    """Refuse `?page=` on a history, which pages by commit (its "older" link)."""
    if "page" in request.args:
        raise InvalidInput("a history pages by ?from=<commit> (its 'older' link), not by ?page=")


def _all() -> bool:
    """Whether `?all=` asks for the closed beads too (absent: no); any other value than
    1/true/yes or 0/false/no (in any case) is refused."""
    text = request.args.get("all", "0")
    if text.lower() not in _ALL_VALUES:
        raise InvalidInput(f"all must be one of {', '.join(_ALL_VALUES)}, not {_cut(text)!r}")
    return _ALL_VALUES[text.lower()]


def _each_parameter_once() -> None:
    """Refuse a query naming a parameter twice (`?all=0&all=1`): a page would take the first
    and drop the other without a word."""
    for name, values in request.args.lists():
        if len(values) > 1:
            raise InvalidInput(f"the query gives {_cut(name)!r} {len(values)} times; give it once")


def _linked(store: Store, text: str) -> Markup:
    """`text` as `_shown` shows it, with each id of a bead of the store made a link to its
    page."""
    if not text:
        return Markup("")
    found = {m.group(1) for m in _ID_IN_TEXT.finditer(text)}
    known = store.get_many(found) if found else {}
    if not known:
        return _shown(text)
    parts: list[Markup] = []
    at = 0
    for match in _ID_IN_TEXT.finditer(text):
        bead_id = match.group(1)
        if bead_id not in known:
            continue
        parts.append(_marked(text[at : match.start()]))
        parts.append(Markup('<a href="{}">{}</a>').format(url_for("bead", ref=bead_id), bead_id))
        at = match.end()
    parts.append(_marked(text[at:]))
    return Markup("<bdi>{}</bdi>").format(Markup("").join(parts))


def _shown(text: str) -> Markup:
    """Stored `text` for a page: escaped, its bidi controls written out (`_marked`), in a
    `<bdi>`, so that neither its controls nor its right-to-left letters reorder the text
    around it."""
    return Markup("<bdi>{}</bdi>").format(_marked(text))


def _marked(text: str) -> Markup:
    """`text` escaped, each bidi control shown as its code point (`<U+202E>`) in a
    left-to-right span of class `bidi` naming it: a reader sees the control, which no
    longer acts."""
    parts: list[Markup] = []
    at = 0
    for match in BIDI_CONTROL.finditer(text):
        char = match.group()
        parts.append(escape(text[at : match.start()]))
        parts.append(
            Markup('<span class="bidi" dir="ltr" title="{}">&lt;{}&gt;</span>').format(
                unicodedata.name(char, "bidi control"), _code_point(char)
            )
        )
        at = match.end()
    parts.append(escape(text[at:]))
    return Markup("").join(parts)


def _code_point(char: str) -> str:
    return f"U+{ord(char):04X}"


def _finalize(item: Any) -> Any:
    """What a template prints, before it is escaped: text that did not go through `shown`
    (an attribute, the page's title: plain text, as a <title> holds no <bdi>) has each bidi
    control written as `<U+202E>`, so none reaches a page raw. Markup (what `shown` made, and
    a form field's value through `typed`) is printed as it is."""
    if isinstance(item, str) and not hasattr(item, "__html__") and BIDI_CONTROL.search(item):
        return BIDI_CONTROL.sub(lambda m: f"<{_code_point(m.group())}>", item)
    return item


def _value(item: Any) -> str:
    """A field's value as a diff shows it."""
    if item is None:
        return "∅"
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, list) and all(isinstance(x, str) for x in item):
        return ", ".join(item) if item else "[]"
    if isinstance(item, list | dict):
        return json.dumps(item, ensure_ascii=False, sort_keys=True)
    return str(item)
