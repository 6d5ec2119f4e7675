"""Re-record site.har: serve site/ on localhost:8000, fetch the page and its resources through
`labd replay record`, write the archive. Run from the repository root:

    python examples/page/record.py
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).parent
SITE = "http://www.labd.test"  # the reserved .test domain: never a real site
RESOURCES = ["", "style.css", "app.js", "photo0.jpg", "photo1.jpg", "photo2.jpg", "photo3.jpg"]


def main() -> None:
    handler = partial(SimpleHTTPRequestHandler, directory=str(HERE / "site"))
    origin = ThreadingHTTPServer(("127.0.0.1", 8000), handler)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    out = HERE / "site.har"
    recorder = subprocess.Popen(
        [sys.executable, "-m", "labd", "replay", "record", str(out), "--port", "0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert recorder.stdout is not None
    port = json.loads(recorder.stdout.readline())["listening"]
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{port}"})
    )
    for name in RESOURCES:
        opener.open(f"http://localhost:8000/{name}").read()
    recorder.send_signal(signal.SIGINT)
    recorder.wait(30)
    origin.shutdown()
    # Browsers never send localhost through a proxy: give the page a name of its own.
    archive = json.loads(out.read_text())
    for entry in archive["log"]["entries"]:
        entry["request"]["url"] = entry["request"]["url"].replace("http://localhost:8000", SITE)
    out.write_text(json.dumps(archive, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
