"""`labd schemas export`."""

from __future__ import annotations

import argparse
from pathlib import Path


def export(args: argparse.Namespace) -> int:
    from labd.mqtt import export_files

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = export_files()
    for name, content in files.items():
        (out / name).write_text(content)
    print(f"wrote {len(files)} files to {out}")
    return 0
