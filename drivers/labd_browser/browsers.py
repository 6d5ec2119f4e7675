"""Browsers launched per job on a desktop: a fresh profile each time, the flags that keep
them quiet and repeatable (no first-run pages, no background networking, no updates), the
job's replay server as their proxy, a fixed window at the top left."""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

from labd.sdk import Policy, UsageError

CHROMIUM_FLAGS = [
    "--test-type",  # no info bar about the flags below
    "--no-sandbox",  # labd may run as root in a lab; the sandbox refuses that
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-features=Translate,MediaRouter,OptimizationHints,OptimizationGuideModelDownloading",
    "--disable-client-side-phishing-detection",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--no-pings",
    "--disable-renderer-backgrounding",
    "--password-store=basic",
    "--remote-debugging-port=0",  # the DevTools port is written into the profile
]

FIREFOX_PREFS = {
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "startup.homepage_welcome_url": "",
    "browser.aboutwelcome.enabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "toolkit.telemetry.reporting.enabled": False,
    "app.update.enabled": False,
    "app.update.auto": False,
    "extensions.update.enabled": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "browser.sessionstore.resume_from_crash": False,
    "browser.tabs.warnOnClose": False,
    "browser.newtabpage.enabled": False,
    "browser.urlbar.suggest.searches": False,
    "toolkit.cosmeticAnimations.enabled": False,
}

KNOWN = {
    "chromium": ("chromium", "chromium-browser", "google-chrome"),
    "firefox": ("firefox-esr", "firefox"),
}
# Windows installs browsers off PATH, in these places (Edge is Chromium: same flags).
WINDOWS_KNOWN = {
    "chromium": (
        r"%ProgramFiles%\Google\Chrome\Application\chrome.exe",
        r"%ProgramFiles(x86)%\Google\Chrome\Application\chrome.exe",
        r"%LocalAppData%\Google\Chrome\Application\chrome.exe",
        r"%ProgramFiles(x86)%\Microsoft\Edge\Application\msedge.exe",
        r"%ProgramFiles%\Microsoft\Edge\Application\msedge.exe",
    ),
    "firefox": (
        r"%ProgramFiles%\Mozilla Firefox\firefox.exe",
        r"%ProgramFiles(x86)%\Mozilla Firefox\firefox.exe",
    ),
}


# Chromium flags that name another program for the browser to start (a prefix for its
# renderers, a GPU or plugin launcher, its helpers' or crash handler's binary): a job's
# command would run that program past policy.programs. Matched after any leading dashes,
# before any "=".
STARTS_A_PROGRAM = (
    "*cmd-prefix",
    "*launcher",
    "*subprocess-path",
    "*handler-path",
    "*-gdb",
    "*gdb-script",
)
# Flags that load code or a profile a job prepared (an extension may start a native
# messaging host, a program a profile names): labd gives the browser a fresh profile of its own.
LOADS_A_PROFILE = ("load-extension", "load-and-launch-app", "user-data-dir")


def find(browser: str, command: list[str], policy: Policy) -> list[str]:
    """The browser's command, its program as an absolute path. Without `command`: the first
    program labd knows for `browser` on the policy's path (a browser labd's own configuration
    names; UsageError when none is installed). With one: its program as policy.programs
    allows it, as the command scenario's (ValueError naming the rule otherwise)."""
    if command:
        if problems := argument_problems(command):
            raise ValueError(problems[0])
        return [policy.program(command[0]), *command[1:]]
    if browser not in KNOWN:
        raise UsageError(f"browser {browser!r}: expected chromium or firefox (or a command)")
    for name in candidates(browser):
        if path := shutil.which(name, path=policy.path):
            return [path]
    raise UsageError(
        f"browser {browser!r}: none of {', '.join(KNOWN[browser])} is installed "
        f"on the policy's path ({policy.path})"
    )


def argument_problems(command: list[str]) -> list[str]:
    """What in a job's browser command no program could get, or would start another program."""
    problems = []
    for n, arg in enumerate(command):
        if "\0" in arg:
            problems.append(f"command.{n}: contains a NUL byte, which no program can get")
        name = arg.lstrip("-").partition("=")[0].lower()
        if (
            n
            and arg.startswith("-")
            and any(fnmatch.fnmatchcase(name, p) for p in STARTS_A_PROGRAM)
        ):
            problems.append(
                f"command.{n}: {arg.partition('=')[0]!r} makes the browser start another "
                "program, which policy.programs would not have checked"
            )
        elif n and arg.startswith("-") and name in LOADS_A_PROFILE:
            problems.append(
                f"command.{n}: {arg.partition('=')[0]!r} loads an extension or a profile "
                "the job prepared (labd gives the browser a fresh profile of its own)"
            )
    return problems


def candidates(browser: str, platform: str = sys.platform) -> list[str]:
    """Where to look for a browser: names on PATH, and on Windows its usual folders."""
    names = list(KNOWN[browser])
    if platform == "win32":
        names += [os.path.expandvars(path) for path in WINDOWS_KNOWN[browser]]
    return names


def version(program: str) -> str:
    """The browser's own version line (`chromium --version`), or why it could not be read:
    recorded with every iteration, and the Perfherder export's application version."""
    path = shutil.which(program) or program
    try:
        stamp = Path(path).stat().st_mtime_ns  # an upgrade in place is a new version
    except OSError as e:
        return f"unknown ({e.strerror})"
    return _version(path, stamp)


@cache
def _version(path: str, stamp: int) -> str:
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unknown ({e})"
    lines = done.stdout.strip().splitlines()
    return lines[-1].strip() if lines else f"unknown (exit status {done.returncode})"


def launch_command(
    browser: str, program: list[str], profile: Path, size: tuple[int, int], proxy: str
) -> list[str]:
    width, height = size
    if browser == "chromium":
        argv = [*program, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-position=0,0"]
        argv.append(f"--window-size={width},{height}")
        if proxy:
            # <-loopback> lifts Chromium's implicit bypass, so localhost pages go through too.
            argv += [f"--proxy-server={proxy}", "--proxy-bypass-list=<-loopback>"]
        return [*argv, "about:blank"]
    write_firefox_profile(profile, proxy)
    return [*program, "--no-remote", "--new-instance", "--profile", str(profile),
            "--width", str(width), "--height", str(height),
            "--remote-debugging-port=0",  # WebDriver BiDi; the port is written into the profile
            "about:blank"]  # fmt: skip


def write_firefox_profile(profile: Path, proxy: str) -> None:
    prefs = dict(FIREFOX_PREFS)
    if proxy:
        host, _, port = proxy.removeprefix("http://").rpartition(":")
        prefs |= {
            "network.proxy.type": 1,
            "network.proxy.http": host,
            "network.proxy.http_port": int(port),
            "network.proxy.ssl": host,
            "network.proxy.ssl_port": int(port),
            "network.proxy.no_proxies_on": "",
            "network.proxy.allow_hijacking_localhost": True,
        }
    profile.mkdir(parents=True, exist_ok=True)
    lines = [f"user_pref({_js(k)}, {_js(v)});" for k, v in prefs.items()]
    (profile / "user.js").write_text("\n".join(lines) + "\n")


def _js(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
