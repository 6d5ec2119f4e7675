"""The web console as an aiohttp application, mounted at /console on the side port.

Server-rendered HTML with one small CSS file and one small script (live progress only), all
served by the daemon: it works offline, loads fast on a lab machine, and every page can be
read with `curl`. Reads need a viewer, device actions an admin, cancelling what the API's
cancel needs (see `labd.console.access`).
"""

from __future__ import annotations

import re
from html import escape
from importlib import resources
from pathlib import Path

from aiohttp import web

from labd.auth import Action, Audit, Principals
from labd.config import HttpSettings
from labd.console.access import (
    ENDED,
    SESSION_IDLE_S,
    ConsoleGuard,
    Handler,
    Sessions,
    TooManySignIns,
    cookie_name,
    security_headers,
    set_session_cookie,
    with_security_headers,
)
from labd.console.artefacts import ArtefactFiles
from labd.console.jobpage import JobPage
from labd.console.lab import LabPages
from labd.console.layout import page
from labd.console.live import LiveFeed
from labd.console.trends import TrendPages
from labd.daemon.api import Api
from labd.daemon.guard import (
    CALLER,
    CHANNEL,
    WILDCARDS,
    ApiGuard,
    allowed_host_names,
    source_of,
)
from labd.events import EventBus
from labd.report import CHART_STYLE

PREFIX = "/console"


def console_application(
    api: Api,
    bus: EventBus,
    principals: Principals,
    audit: Audit,
    settings: HttpSettings,
    jobs_dir: Path,
) -> web.Application:
    """The console, behind its guard; mount it with `app.add_subapp(PREFIX, ...)`."""
    lab, trends = LabPages(api), TrendPages(api)
    files = ArtefactFiles(jobs_dir)
    job = JobPage(api, files)
    signin = SignIn(audit)
    live = LiveFeed(bus, api.store, signin.sessions, security_headers())
    read = Action.READ
    table = [
        ("GET", "/", lab.home, read),
        ("GET", "/devices", lab.devices, read),
        ("POST", "/devices/{id}/{action}", lab.device_action, Action.ADMINISTER),
        ("GET", "/queue", lab.queue, read),
        ("GET", "/running", lab.running, read),
        ("GET", "/jobs", lab.jobs, read),
        ("GET", "/jobs/{id}", job.show, read),
        ("POST", "/jobs/{id}/cancel", job.cancel, Action.CANCEL),
        ("GET", "/jobs/{id}/still", files.still, read),
        ("GET", "/jobs/{id}/artefacts/{name:.+}", files.serve, read),
        ("GET", "/compare", trends.compare, read),
        ("GET", "/history", trends.history, read),
        ("GET", "/live", live.stream, read),
        ("POST", "/logout", signin.sign_out, read),
    ]
    site = ApiGuard(
        principals,
        audit,
        allowed_host_names([settings.host, settings.api_host], settings.allowed_hosts),
        {},
        any_ip_literal=settings.host in WILDCARDS - {""},
    )
    guard = ConsoleGuard(
        site,
        principals,
        audit,
        signin.sessions,
        {(method, PREFIX + _canonical(path)): action for method, path, _, action in table},
        form_within_s=settings.header_timeout_s,
    )
    signin.guard = guard
    app = web.Application(
        middlewares=[with_security_headers, guard.middleware], client_max_size=64 * 1024
    )
    app.add_routes([web.route(method, path, handler) for method, path, handler, _ in table])
    app.add_routes(
        [
            web.get("/login", signin.form),
            web.post("/login", signin.sign_in),
            web.get("/static/console.css", _static("console.css", "text/css", CHART_STYLE)),
            web.get("/static/live.js", _static("live.js", "text/javascript")),
        ]
    )
    app.on_shutdown.append(live.close_all)
    app.on_shutdown.append(files.close)
    return app


class SignIn:
    """The sign-in page (a principal's API token, once) and signing out."""

    def __init__(self, audit: Audit) -> None:
        self.sessions = Sessions()
        self.audit = audit
        self.guard: ConsoleGuard | None = None

    async def form(self, request: web.Request, problem: str = "") -> web.Response:
        target = _local(request.query.get("next", ""))
        if request.get(CALLER) is not None and not problem:
            raise web.HTTPSeeOther(target)
        stale = request.get(CALLER) is None and bool(request.cookies.get(cookie_name(request)))
        if stale and not problem:  # a cookie of a session this daemon no longer holds
            problem = ENDED[:1].upper() + ENDED[1:] + "."
        body = (
            (f"<p class='finding'>{escape(problem)}</p>" if problem else "")
            + "<form method='post' action='/console/login' class='login'>"
            f"<input type='hidden' name='next' value='{escape(target)}'>"
            "<label>API token of your principal<input type='password' name='token' "
            "autocomplete='current-password' required autofocus></label>"
            "<button type='submit'>Sign in</button></form>"
            "<p class='note'>The token is the one `labd --api-url` takes (the administrator "
            "gives one per principal). It is checked once; the browser keeps a session cookie "
            f"that lapses after {SESSION_IDLE_S // 3600} hours unused or when labd restarts.</p>"
        )
        response = page(request, "Sign in to the labd console", body)
        if stale:
            response.del_cookie(cookie_name(request), path=PREFIX)
        return response

    async def sign_in(self, request: web.Request) -> web.Response:
        assert self.guard is not None
        data = await request.post()
        target, source = request.path, source_of(request)
        token = str(data.get("token", "")).strip()
        if not token:
            why = "no token was given (the form's `token` field is missing or empty)"
            self.audit.refused(CHANNEL, "-", "sign_in", target, source, "no_credential", why)
            response = await self.form(request, f"Sign-in refused: {why}.")
            response.set_status(400)
            return response
        try:
            found = self.guard.sign_in(token)
        except TooManySignIns as e:
            self.audit.refused(
                CHANNEL, e.principal, "sign_in", target, source, "rate_limited", str(e)
            )
            response = await self.form(request, str(e))
            response.set_status(429)
            response.headers["Retry-After"] = str(e.retry_after_s)
            return response
        if found is None:  # audited and counted like a wrong bearer token on the API
            self.audit.refused(
                CHANNEL, "-", "sign_in", target, source, "bad_token", "unknown token at sign-in"
            )
            response = await self.form(request, "That token belongs to no principal of this lab.")
            response.set_status(401)
            return response
        sid, principal = found
        self.audit.allowed(CHANNEL, principal.name, "sign_in", target, source)
        response = web.HTTPSeeOther(_local(str(data.get("next", ""))))
        set_session_cookie(request, response, sid)
        raise response

    async def sign_out(self, request: web.Request) -> web.Response:
        caller = request[CALLER]
        self.sessions.close(request.cookies.get(cookie_name(request), ""))
        self.audit.allowed(CHANNEL, caller.principal.name, "sign_out", request.path, caller.source)
        response = web.HTTPSeeOther(f"{PREFIX}/login")
        response.del_cookie(cookie_name(request), path=PREFIX)
        raise response


def _canonical(path: str) -> str:
    """A route's path as aiohttp names its resource: `{name:.+}` is `{name}`."""
    return re.sub(r"\{(\w+):[^}]*\}", r"{\1}", path)


def _local(target: str) -> str:
    """A redirect target inside the console (never elsewhere: no open redirect)."""
    if target.startswith(PREFIX + "/") and not target.startswith("//") and "\\" not in target:
        return target
    return f"{PREFIX}/"


def _static(name: str, content_type: str, extra: str = "") -> Handler:
    text = resources.files("labd.console").joinpath("static", name).read_text() + extra

    async def serve(_: web.Request) -> web.Response:
        return web.Response(
            text=text, content_type=content_type, headers={"Cache-Control": "max-age=3600"}
        )

    return serve
