from __future__ import annotations

import json
from pathlib import Path

from labd.mqtt.messages import MESSAGES
from labd.mqtt.schemas import asyncapi, export_files

SCHEMAS = Path(__file__).parents[3] / "schemas"


def test_committed_schemas_match_the_models() -> None:
    """schemas/ is generated: run `labd schemas export` when this fails."""
    files = export_files()
    assert sorted(p.name for p in SCHEMAS.glob("*.json")) == sorted(files)
    for name, content in files.items():
        assert (SCHEMAS / name).read_text() == content, f"schemas/{name} drifted"


def test_asyncapi_document_is_complete_and_its_references_resolve() -> None:
    doc = asyncapi()
    assert doc["asyncapi"] == "3.0.0"
    text = json.dumps(doc)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        node = doc
        for key in ref.removeprefix("#/").split("/"):
            node = node[key]  # raises KeyError on a dangling reference
    used = {m for ch in doc["channels"].values() for m in ch["messages"]}
    assert used == set(MESSAGES)
    for operation in doc["operations"].values():
        assert operation["action"] in ("send", "receive")
