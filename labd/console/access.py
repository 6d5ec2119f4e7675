"""The console's front door: the API's principals and roles, for a browser.

A browser cannot send a bearer token with a link or a form, so a person signs in once with
their principal's token and gets a session: a random id in an HttpOnly, SameSite=Strict
cookie, kept in memory (a restart signs everyone out) and looked up at every request, so a
reload that changes a principal's role applies at once. In this order, each refusal audited:
1. Host and Origin name this daemon, as for the API (DNS rebinding, cross-site requests);
2. a page needs a session (a browser is sent to the sign-in page; anything else gets 401);
3. the principal's role allows the route's action (403);
4. a write is a same-origin form post: an Origin header naming this daemon (browsers send
   one with every POST), form-encoded, carrying the session's anti-forgery token (403).
"""

from __future__ import annotations

import asyncio
import hmac
import math
import secrets
import time
from collections import OrderedDict, defaultdict, deque
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from urllib.parse import quote

from aiohttp import web

from labd.auth import Action, Audit, Principal, Principals
from labd.daemon.guard import CALLER, ApiGuard, Caller, Refused, audit_refusal, source_of

COOKIE = "labd_console"  # and the port: cookie_name
SESSION_IDLE_S = 8 * 3600
SESSIONS_PER_PRINCIPAL = 20  # a principal's new sign-in past these closes its own oldest
MAX_SESSIONS = 1000  # a last resort: it takes 50 principals each at their cap to reach it
SIGN_INS_PER_MINUTE = 10  # each principal's, in a sliding minute
FORM = "application/x-www-form-urlencoded"
PATH = "/console"  # the cookie's scope
ENDED = (
    "your console session has ended (signed out, unused for "
    f"{SESSION_IDLE_S // 3600} hours, or labd restarted): sign in again"
)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CSRF = web.RequestKey("csrf", str)
OPEN_PATHS = frozenset({"/console/login", "/console/static/console.css", "/console/static/live.js"})


def cookie_name(request: web.BaseRequest) -> str:
    """The session cookie's name, one per listening port: browsers keep cookies by host and
    path, not port, so two consoles on one machine would replace each other's sessions (and
    be sent each other's)."""
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    return f"{COOKIE}_{sockname[1]}" if isinstance(sockname, tuple) else COOKIE


@dataclass
class Session:
    principal: str
    csrf: str  # the anti-forgery token every form of this session carries
    seen: float


class TooManySignIns(Exception):
    """A principal signed in more than SIGN_INS_PER_MINUTE times in the last minute;
    `retry_after_s`: whole seconds until its oldest sign-in leaves the minute."""

    def __init__(self, principal: str, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.principal, self.retry_after_s = principal, retry_after_s


class Sessions:
    """Signed-in browsers: session id -> principal, forgotten after SESSION_IDLE_S idle.
    Whoever holds something on a session's behalf (a live stream) learns of its end through
    `on_close`."""

    def __init__(self) -> None:
        self._by_id: OrderedDict[str, Session] = OrderedDict()  # least recently used first
        self._sign_ins: defaultdict[str, deque[float]] = defaultdict(deque)
        self.on_close: list[Callable[[str], None]] = []

    def open(self, principal: str) -> str:
        """A new session for `principal`. One principal's sign-ins close only its own sessions
        (its least recently used, past SESSIONS_PER_PRINCIPAL), so no principal can sign
        another out; TooManySignIns past SIGN_INS_PER_MINUTE."""
        self._count_sign_in(principal)
        own = [sid for sid, session in self._by_id.items() if session.principal == principal]
        for sid in own[: max(0, len(own) - SESSIONS_PER_PRINCIPAL + 1)]:
            self.close(sid)
        sid = secrets.token_urlsafe(32)
        self._by_id[sid] = Session(principal, secrets.token_urlsafe(24), time.monotonic())
        while len(self._by_id) > MAX_SESSIONS:  # the longest idle of all goes first
            self.close(next(iter(self._by_id)))
        return sid

    def _count_sign_in(self, principal: str) -> None:
        now = time.monotonic()
        recent = self._sign_ins[principal]
        while recent and now - recent[0] > 60:
            recent.popleft()
        if len(recent) >= SIGN_INS_PER_MINUTE:
            wait_s = max(1, math.ceil(60 - (now - recent[0])))
            raise TooManySignIns(
                principal,
                f"principal {principal!r} signed in {len(recent)} times in the last minute "
                f"(limit {SIGN_INS_PER_MINUTE}); try again in {wait_s} s",
                wait_s,
            )
        recent.append(now)

    def get(self, sid: str) -> Session | None:
        if not self.alive(sid):
            return None
        session = self._by_id[sid]
        session.seen = time.monotonic()
        self._by_id.move_to_end(sid)
        return session

    def alive(self, sid: str) -> bool:
        """Whether the session is still open, without counting this as a use (an expired one
        is closed now)."""
        session = self._by_id.get(sid)
        if session is not None and time.monotonic() - session.seen > SESSION_IDLE_S:
            self.close(sid)
            return False
        return session is not None

    def close(self, sid: str) -> None:
        if self._by_id.pop(sid, None) is not None:
            for listener in self.on_close:
                listener(sid)


FORM_MAX = 16 * 1024  # a token or an anti-forgery token, and a few fields


async def _read_form(request: web.Request, within_s: float) -> None:
    """Read a posted form of at most FORM_MAX bytes, whole within `within_s` (the listener's
    header time-out, which does not cover a body): 300 clients each trickling a byte of a 1 MB
    sign-in body every 5 s held every connection of the side port, /healthz and /metrics with
    it, for as long as they liked."""
    if request.content_length is None:  # chunked, or no body at all
        raise Refused(
            411,
            "length_required",
            "a console form post needs a Content-Length (a form sent chunked, or without a "
            "body, is not taken)",
        )
    if request.content_length > FORM_MAX:
        raise Refused(
            413,
            "too_large",
            f"a console form is at most {FORM_MAX} bytes, this one says {request.content_length:,}",
        )
    try:
        async with asyncio.timeout(within_s):
            await request.post()
    except TimeoutError:
        raise Refused(408, "too_slow", f"the form did not arrive within {within_s:g} s") from None


class ConsoleGuard:
    """aiohttp middleware that admits console requests (see the module doc)."""

    def __init__(
        self,
        site: ApiGuard,
        principals: Principals,
        audit: Audit,
        sessions: Sessions,
        actions: Mapping[tuple[str, str], Action],
        form_within_s: float = 30.0,
    ) -> None:
        self.site, self.principals, self.audit = site, principals, audit
        self.sessions, self.actions = sessions, actions
        self.form_within_s = form_within_s

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        action = self.actions.get((request.method, _canonical(request)))
        if action is None and request.path not in OPEN_PATHS:
            action = Action.READ  # whatever else is asked for, a 404 too, needs a session
        try:
            response = await self._admit(request, action, handler)
        except Refused as e:
            audit_refusal(self.audit, request, action, e)
            if e.status == 401 and request.method == "GET" and _wants_page(request):
                # The sign-in page says why a cookie it was sent no longer signs in, and clears it.
                raise web.HTTPSeeOther(f"/console/login?next={quote(request.path_qs)}") from None
            refusal = web.Response(status=e.status, text=f"{e}\n")
            if e.status == 401 and request.cookies.get(cookie_name(request)):
                refusal.del_cookie(cookie_name(request), path=PATH)
            return refusal
        return response

    async def _admit(
        self, request: web.Request, action: Action | None, handler: Handler
    ) -> web.StreamResponse:
        self.site.check_site(request)
        if request.method == "POST":
            self._check_form_post(request)
            await _read_form(request, self.form_within_s)  # handlers get aiohttp's cached form
        sid = request.cookies.get(cookie_name(request), "")
        session = self.sessions.get(sid) if sid else None
        principal = self.principals.get(session.principal) if session else None
        if action is None:  # the sign-in page and the static files
            if principal is not None and session is not None:
                request[CALLER] = Caller(principal, source_of(request))
                request[CSRF] = session.csrf
            return await handler(request)
        if session is None or principal is None:
            raise Refused(
                401, "no_credential", ENDED if sid else "the console needs you to sign in"
            )
        if not principal.may(action):
            raise Refused(
                403,
                "forbidden",
                f"principal {principal.name!r} ({principal.role.value}) may not {action.value}",
                principal.name,
            )
        if request.method == "POST":
            _check_csrf(await request.post(), session.csrf, principal.name)
        request[CALLER] = Caller(principal, source_of(request))
        request[CSRF] = session.csrf
        try:
            response = await handler(request)
        except web.HTTPException as e:  # a redirect after a write is a use too
            renew_cookie(request, e, sid)
            raise
        if not response.prepared:  # a live stream has sent its headers already
            renew_cookie(request, response, sid)
        return response

    def _check_form_post(self, request: web.Request) -> None:
        if "Origin" not in request.headers:
            raise Refused(403, "origin_missing", "a console form post must carry an Origin")
        if request.content_type != FORM:
            raise Refused(
                415,
                "unsupported_media_type",
                f"POST {request.path}: the console takes form posts ({FORM}), got "
                f"{request.headers.get('Content-Type') or 'none'}",
            )

    def sign_in(self, token: str) -> tuple[str, Principal] | None:
        """A new session for the principal holding `token`, or None for an unknown token;
        TooManySignIns when that principal signs in too often."""
        principal = self.principals.by_token(token.strip())
        if principal is None:
            return None
        return self.sessions.open(principal.name), principal


def _check_csrf(form: Mapping[str, object], expected: str, principal: str) -> None:
    """The form carries the session's anti-forgery token (403 naming what is wrong)."""
    given = form.get("csrf")
    if not given:
        raise Refused(
            403, "bad_csrf_token", "the form carries no anti-forgery token (csrf)", principal
        )
    if not hmac.compare_digest(str(given), expected):
        raise Refused(403, "bad_csrf_token", "the form's anti-forgery token is wrong", principal)


def set_session_cookie(request: web.BaseRequest, response: web.StreamResponse, sid: str) -> None:
    """The session cookie, good for SESSION_IDLE_S from now: the session's own lapse."""
    response.set_cookie(
        cookie_name(request), sid, path=PATH, httponly=True, samesite="Strict",
        max_age=SESSION_IDLE_S,
    )  # fmt: skip


def renew_cookie(request: web.BaseRequest, response: web.StreamResponse, sid: str) -> None:
    """Send the cookie again with each answer to a signed-in request, so that it lapses when
    the session does (8 hours unused), not 8 hours after sign-in; unless the handler set or
    cleared it itself (signing out)."""
    if cookie_name(request) not in response.cookies:
        set_session_cookie(request, response, sid)


def _canonical(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else request.path


def _wants_page(request: web.Request) -> bool:
    return "text/html" in request.headers.get("Accept", "")


@web.middleware
async def with_security_headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every console answer gets `security_headers()`: pages, files, redirects and errors
    alike (aiohttp's own 404, a 303 to the sign-in page); a header the handler set wins."""
    try:
        response = await handler(request)
    except web.HTTPException as e:  # a redirect or an error raised as an answer
        _add_headers(e.headers)
        raise
    if not response.prepared:  # a stream sent its own already (the live feed does)
        _add_headers(response.headers)
    return response


def _add_headers(headers: MutableMapping[str, str]) -> None:
    for name, value in security_headers().items():
        headers.setdefault(name, value)


def security_headers() -> dict[str, str]:
    """Nothing from elsewhere, never in a frame (clickjacking an admin's buttons), no cache."""
    return {
        "Content-Security-Policy": (
            "default-src 'self'; img-src 'self' data:; media-src 'self'; style-src 'self'; "
            "script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        ),
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
    }
