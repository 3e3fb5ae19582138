"""`delivery.nats`: this machine's settings (the store's git config, `gc config set --local`)
and the stream's (config.yaml, the same on every machine)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from beads.errors import InvalidInput
from beads.records.agents import canonical_agent, spellings
from beads.records.times import parse_duration
from beads.settings.localconfig import local_settings, machine_id, machine_name
from beads.sync.auto import read_local
from inbox.deliveryconfig import NATS_DEFAULTS, nats_setting

STREAM = "INBOX_EVENTS"
# A settled item's key is kept at least max_age + dedup_window (Delivery.keep_keys): a
# redelivery finds its item still there.
MAX_AGE = NATS_DEFAULTS["max_age"]
DEDUP_WINDOW = NATS_DEFAULTS["dedup_window"]
MAX_MSGS = NATS_DEFAULTS["max_msgs"]
_STREAM_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


class Settings:
    """What a relay, `gc nats setup` and `gc nats status` need to know."""

    def __init__(self, root: Path, config: dict[str, Any], agents: list[str] | None = None):
        local = local_settings(root / ".git")
        url = local.get("delivery.nats.url")
        if not url:
            raise InvalidInput(
                "no NATS server for this machine: gc config set --local delivery.nats.url "
                "nats://HOST:4222"
            )
        self.servers: list[str] = url.split(",")
        self.creds: str | None = local.get("delivery.nats.creds")
        self.token: str | None = local.get("delivery.nats.token")
        self.tls = {k: local.get(f"delivery.nats.tls_{k}") for k in ("ca", "cert", "key")}
        self.agents: list[str] = list(
            dict.fromkeys(agents if agents is not None else local.get("delivery.nats.agents", []))
        )
        # The one identity rule (beads/records/agents.py): the full names of this machine's agents,
        # and every spelling they may arrive under (a relay of an older release publishes
        # `inbox.agent.mayor` for `gastown/mayor`: both subjects are taken for one release).
        self.full: list[str] = list(dict.fromkeys(canonical_agent(a, config) for a in self.agents))
        self.names: list[str] = list(
            dict.fromkeys(n for a in self.agents for n in (a, *spellings(a, config)))
        )
        git = root / ".git"
        self.machine: str = machine_name(read_local(git))
        # This clone's identity, written into its consumer (inbox/nats/machines.py).
        self.machine_id: str = machine_id(git)
        shared = (config.get("delivery") or {}).get("nats") or {}
        self.stream: str = str(shared.get("stream", STREAM))
        if not _STREAM_RE.fullmatch(self.stream):
            raise InvalidInput(f"delivery.nats.stream: {self.stream!r} is not a stream name")
        self.max_age = _seconds(shared.get("max_age", MAX_AGE))
        self.dedup_window = _seconds(shared.get("dedup_window", DEDUP_WINDOW))
        self.max_msgs = int(nats_setting(config, "max_msgs"))  # the stream's cap (seed 001)

    @property
    def shown_servers(self) -> list[str]:
        """The server URLs as messages show them: a password in a URL is masked."""
        return [re.sub(r"//([^:/@]*):[^@/]*@", r"//\1:***@", url) for url in self.servers]

    @property
    def consumer(self) -> str:
        """This machine's durable consumer."""
        return f"relay-{self.machine}"

    def connect_options(self, *, anonymous: bool = False) -> dict[str, Any]:
        """nats-py's `connect` options for the credentials and TLS settings; `anonymous`:
        without any credentials (TLS trust kept), to see whether the server asks for them."""
        options: dict[str, Any] = {"servers": self.servers}
        if anonymous:
            options["servers"] = [re.sub(r"//[^/@]*@", "//", url) for url in self.servers]
            if self.tls["ca"]:
                import ssl

                options["tls"] = ssl.create_default_context(cafile=self.tls["ca"])
            return options
        if self.creds:
            options["user_credentials"] = self.creds
        if self.token:
            options["token"] = self.token
        if any(self.tls.values()):
            import ssl

            context = ssl.create_default_context(cafile=self.tls["ca"])
            if self.tls["cert"]:
                context.load_cert_chain(self.tls["cert"], self.tls["key"])
            options["tls"] = context
        return options


def status_path(root: Path) -> Path:
    """Where the relay says what it is doing (`gc nats status` reads it)."""
    return root / ".runtime" / "nats-relay.json"


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else parse_duration(str(value))
