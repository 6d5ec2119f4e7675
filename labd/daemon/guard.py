"""The API's front door: whether a request may come in at all, and who is asking.

In this order, each refusal audited and answered with the reason:
1. the Host header is one `host[:port]` naming this machine, and a port in it is the one the
   request came in on (403 otherwise: a DNS-rebinding page names its own host);
2. an Origin header, when a browser sends one, is exactly `http(s)://host[:port]` naming this
   machine, and its port is the one the request came in on or the Host's (403: a page of
   another web server of this machine, on another port, is another origin);
3. a write carries JSON (415: a cross-site form can send text/plain without a preflight);
4. a credential: a bearer token, or on the Unix socket the peer's account (401 / 403);
5. the principal's role allows the route's action (403).
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import re
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from aiohttp import web

from labd.auth import Action, Audit, Principal, Principals, Role
from labd.config import LOCAL_PRINCIPAL
from labd.daemon.listeners import peer_of

CHANNEL = "http"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Caller:
    """Who made an API request, and from where (an address, or a local account's uid)."""

    principal: Principal
    source: str


CALLER = web.RequestKey("caller", Caller)


class Refused(Exception):
    def __init__(self, status: int, reason: str, message: str, principal: str = "-") -> None:
        super().__init__(message)
        self.status, self.reason, self.principal = status, reason, principal


def allowed_host_names(listen: Iterable[str], extra: Iterable[str]) -> frozenset[str]:
    """The names a Host header may carry: the addresses labd listens on, loopback, this
    machine's name, and those the admin adds."""
    names = {"localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn()}
    names |= {host for host in listen if host not in WILDCARDS}
    names |= set(extra)
    return frozenset(_normal(name) for name in names if name)


def _normal(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


# RFC 9110's `uri-host [":" port]`, with nothing around it: a name, an IPv4 or a bracketed IPv6
# address. A trailing dot is kept, so `localhost.` is not `localhost` (nor a browser origin's).
_AUTHORITY = re.compile(
    r"(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9_.-]+))(?::(?P<port>\d{1,5}))?"
)
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#@\s]+)")
DEFAULT_PORTS = {"http": 80, "https": 443}


def authority(value: str) -> tuple[str, int | None] | None:
    """(host, port or None) of a Host header value, or None when it is not exactly one
    `host[:port]`."""
    found = _AUTHORITY.fullmatch(value)
    if found is None:
        return None
    port = int(found["port"]) if found["port"] else None
    if port is not None and not 0 < port < 65536:
        return None
    return (found["ip6"] or found["name"]).lower(), port


def listener_port(request: web.BaseRequest) -> int | None:
    """The TCP port the request came in on (None on the Unix socket)."""
    name = request.transport.get_extra_info("sockname") if request.transport else None
    return int(name[1]) if isinstance(name, tuple) else None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class ApiGuard:
    """aiohttp middleware that admits API requests (see the module doc)."""

    def __init__(
        self,
        principals: Principals,
        audit: Audit,
        allowed_hosts: frozenset[str],
        actions: Mapping[tuple[str, str], Action],
        any_ip_literal: bool = False,
    ) -> None:
        self.principals = principals
        self.audit = audit
        self.allowed_hosts = allowed_hosts
        self.actions = actions  # (method, route pattern) -> what the route does
        # On a wildcard address every address of the machine is one labd listens on; a
        # rebinding page always names its own domain, never an IP literal.
        self.any_ip_literal = any_ip_literal
        self.daemon_uid = os.geteuid()
        self.local = principals.local or Principal(name=LOCAL_PRINCIPAL, role=Role.ADMIN)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        action = self.action_of(request)
        try:
            caller = self.admit(request, action)
        except Refused as e:
            audit_refusal(self.audit, request, action, e)
            headers = {"WWW-Authenticate": 'Bearer realm="labd"'} if e.status == 401 else {}
            return web.json_response(
                {"errors": [str(e)], "reason": e.reason}, status=e.status, headers=headers
            )
        request[CALLER] = caller
        return await handler(request)

    def action_of(self, request: web.Request) -> Action | None:
        resource = request.match_info.route.resource
        if resource is None:
            return None
        return self.actions.get((request.method, resource.canonical))

    def admit(self, request: web.Request, action: Action | None) -> Caller:
        self._check_origin(request, self._check_host(request))
        if request.method in WRITE_METHODS and request.content_type != "application/json":
            raise Refused(
                415,
                "unsupported_media_type",
                f"{request.method} {request.path}: Content-Type must be application/json, "
                f"got {request.headers.get('Content-Type') or 'none'}",
            )
        caller = self._authenticate(request)
        if action is not None and not caller.principal.may(action):
            raise Refused(
                403,
                "forbidden",
                f"principal {caller.principal.name!r} ({caller.principal.role.value}) may not "
                f"{action.value}",
                caller.principal.name,
            )
        return caller

    def check_site(self, request: web.Request) -> None:
        """The Host and Origin checks alone (steps 1 and 2): the console's front door."""
        self._check_origin(request, self._check_host(request))

    def _host_allowed(self, name: str) -> bool:
        return name in self.allowed_hosts or (self.any_ip_literal and _is_ip(name))

    def _check_host(self, request: web.Request) -> tuple[str, int | None]:
        values = request.headers.getall("Host", [])
        value = values[0] if len(values) == 1 else ", ".join(values)
        found = authority(value) if len(values) == 1 else None
        if found is None or not self._host_allowed(found[0]):
            raise Refused(
                403,
                "host_not_allowed",
                f"Host {value or '(none)'!r} is not one name of this daemon "
                "(add it to http.allowed_hosts if clients use it)",
            )
        port = listener_port(request)
        if found[1] is not None and port is not None and found[1] != port:
            raise Refused(
                403, "host_not_allowed", f"Host {value!r}: this daemon listens on port {port} here"
            )
        return found

    def _check_origin(self, request: web.Request, host: tuple[str, int | None]) -> None:
        given = request.headers.getall("Origin", [])
        if not given:
            return  # not a browser, or a same-origin GET
        if len(given) > 1:  # which one counts would depend on who reads them (a proxy adds one)
            raise Refused(
                403, "origin_not_allowed", f"Origin given {len(given)} times; a browser sends one"
            )
        origin = given[0]
        found = _ORIGIN.fullmatch(origin)
        site = authority(found["authority"]) if found else None
        if found is None or site is None or not self._host_allowed(site[0]):
            raise Refused(403, "origin_not_allowed", f"cross-origin request from {origin!r}")
        default = DEFAULT_PORTS[found["scheme"]]
        port = site[1] or default
        # The page is this daemon's when it came from the port the request came in on, or
        # from the very host and port the request names (a TLS proxy in front forwards its own).
        if port != listener_port(request) and (site[0], port) != (host[0], host[1] or default):
            raise Refused(
                403,
                "origin_not_allowed",
                f"cross-origin request from {origin!r} (another port is another site)",
            )

    def _authenticate(self, request: web.Request) -> Caller:
        source = source_of(request)
        given = request.headers.getall("Authorization", [])
        if len(given) > 1:  # which one counts would depend on who reads them (a proxy adds one)
            raise Refused(
                401, "bad_credential", f"Authorization given {len(given)} times; send one"
            )
        header = given[0] if given else None
        if header is not None:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Refused(401, "bad_credential", "Authorization must be 'Bearer <token>'")
            principal = self.principals.by_token(token.strip())
            if principal is None:
                raise Refused(401, "bad_token", "unknown bearer token")
            return Caller(principal, source)
        peer = peer_of(request.transport.get_extra_info("socket") if request.transport else None)
        if peer is None:
            raise Refused(
                401,
                "no_credential",
                "the API needs a credential: 'Authorization: Bearer <token>' "
                "(or the daemon's local Unix socket)",
            )
        if peer.uid in (self.daemon_uid, 0):
            return Caller(self.local, source)
        account = _account(peer.uid)
        principal = self.principals.by_unix_user(account) if account else None
        if principal is None:
            raise Refused(
                403,
                "unknown_peer",
                f"local account {account or peer.uid!r} is not a principal of this lab "
                "(auth.principals.<name>.unix_users)",
            )
        return Caller(principal, source)


def audit_refusal(audit: Audit, request: web.Request, action: Action | None, e: Refused) -> None:
    """Write a front door's refusal to the audit trail (and so to the refusal counters)."""
    audit.refused(
        CHANNEL,
        e.principal,
        action.value if action else request.method,
        request.path,
        source_of(request),
        e.reason,
        str(e),
    )


def _account(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def source_of(request: web.Request) -> str:
    """Where a request came from: an address, or the local account on the Unix socket."""
    sock = request.transport.get_extra_info("socket") if request.transport else None
    peer = peer_of(sock)
    if peer is not None:
        return f"uid {peer.uid} (pid {peer.pid})"
    return request.remote or "-"
