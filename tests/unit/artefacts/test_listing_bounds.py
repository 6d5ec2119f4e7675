"""A job that writes thousands of files: the API lists them a page at a time (off the event
loop, with a total and the next offset), and the MQTT result links a bounded number and says
how many more there are and where they are listed."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from labd.artefacts import ARTEFACTS_PAGE, ARTEFACTS_PAGE_MAX, ArtefactKeeper, artefact_page
from labd.artefacts.keeper import RESULT_LINKS
from labd.auth.principals import Principal, Role
from labd.config import ArtefactSettings, MqttSettings
from labd.daemon.artefact_routes import ArtefactRoutes
from labd.daemon.guard import CALLER, Caller
from labd.events import EventBus
from labd.model import Job, JobState, TestSpec
from labd.mqtt import bridge as bridge_module
from labd.mqtt.bridge import MqttBridge
from labd.mqtt.messages import ResultMessage
from labd.mqtt.topics import Topics
from tests.unit.fakes import JobMemory

FILES = 3000
BASE = "https://lab-host-1.example:9472"


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Made once: the tests only read it."""
    tmp_path = tmp_path_factory.mktemp("state")
    folder = tmp_path / "jobs" / "many"
    (folder / "iteration-7").mkdir(parents=True)
    for n in range(FILES - 2):
        (folder / f"f{n:05d}.txt").touch()
    (folder / "iteration-7" / "video.webm").write_bytes(b"v" * 10)
    (folder / "job.log").write_text("PERFHERDER_DATA: {}\n")
    return tmp_path


def _job() -> Job:
    spec = TestSpec(suite="s", test="t", scenario="x")
    return Job(id="many", spec=spec, state=JobState.SUCCEEDED, submitted_at=datetime.now(UTC))


def _keeper(state_dir: Path, base_url: str = BASE) -> ArtefactKeeper:
    return ArtefactKeeper(
        state_dir, ArtefactSettings(base_url=base_url), JobMemory([_job()]), EventBus()
    )  # type: ignore[arg-type]


def test_a_page_is_made_of_the_slice_only_with_the_total_and_the_next_offset(
    state_dir: Path,
) -> None:
    jobs = state_dir / "jobs"
    first = artefact_page(jobs, "many")
    assert (len(first.artefacts), first.total, first.next) == (ARTEFACTS_PAGE, FILES, 1000)
    last = artefact_page(jobs, "many", 2500, 1000)
    assert (len(last.artefacts), last.next, last.left_out) == (500, None, FILES - 500)
    assert [a.name for a in last.artefacts][-2:] == ["iteration-7/video.webm", "job.log"]
    capped = artefact_page(jobs, "many", 0, 10**9)
    assert len(capped.artefacts) == min(FILES, ARTEFACTS_PAGE_MAX)
    # The console's evidence: every video, wherever it falls, with a page of one file.
    evidence = artefact_page(jobs, "many", 0, 1, frozenset({"video"}))
    assert [a.name for a in evidence.of_kinds] == ["iteration-7/video.webm"]


def _listing(state_dir: Path) -> Callable[[str], Awaitable[tuple[int, dict[str, Any]]]]:
    """GET the job's artefact listing with a query string: (status, answer)."""
    routes = ArtefactRoutes(JobMemory([_job()]), _keeper(state_dir), "h", None)  # type: ignore[arg-type]

    async def get(query: str) -> tuple[int, dict[str, Any]]:
        request = make_mocked_request(
            "GET", f"/api/v1/jobs/many/artefacts{query}", match_info={"id": "many"}
        )
        request[CALLER] = Caller(Principal("viewer", Role.VIEWER), "test")  # as the guard sets
        answer = await routes.list_job(request)
        assert answer.body is not None
        return answer.status, json.loads(bytes(answer.body))  # type: ignore[arg-type]

    return get


async def test_the_api_answers_a_first_page_of_the_documented_size(state_dir: Path) -> None:
    get = _listing(state_dir)

    status, first = await get("")
    assert status == 200
    assert (first["offset"], first["limit"], first["total"]) == (0, ARTEFACTS_PAGE, FILES)
    assert len(first["artefacts"]) == ARTEFACTS_PAGE and first["next"] == ARTEFACTS_PAGE
    assert first["artefacts"][0]["path"] == "/api/v1/jobs/many/artefacts/f00000.txt"
    names = [a["name"] for a in first["artefacts"]]
    offset = first["next"]
    while offset is not None:
        status, page = await get(f"?offset={offset}&limit=700")
        assert status == 200 and page["total"] == FILES
        names += [a["name"] for a in page["artefacts"]]
        offset = page["next"]
    assert len(names) == len(set(names)) == FILES and names == sorted(names)
    assert (await get("?limit=0"))[0] == 400
    assert (await get("?offset=-1"))[0] == 400
    assert (await get("?limit=many"))[0] == 400


async def test_the_mqtt_result_links_a_bounded_number_and_counts_the_rest(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keeper = _keeper(state_dir)
    bridge = MqttBridge.__new__(MqttBridge)  # only what publishing a result uses
    bridge.store = JobMemory([_job()])  # type: ignore[assignment]
    bridge.topics = Topics("labd/v1/lab1")
    bridge._artefact_links = lambda job: keeper.links(job, "h")

    async def no_summary(store: Any, job: Job) -> dict[str, Any]:
        return {"summary": {}, "set_aside": {}}

    monkeypatch.setattr(bridge_module, "digest_of", no_summary)
    sent: list[tuple[str, bytes]] = []

    class Client:
        async def publish(
            self, topic: str, payload: bytes, qos: int, retain: bool = False, **_: Any
        ) -> None:
            sent.append((topic, payload))

    await bridge._publish_result(Client(), "many")  # type: ignore[arg-type]
    ((topic, payload),) = sent
    assert topic == "labd/v1/lab1/results/s/t"
    assert len(payload) < MqttSettings().max_payload_bytes  # what labd itself would take in
    result = ResultMessage.model_validate_json(payload)
    assert len(result.artefacts) == RESULT_LINKS
    assert result.artefacts[0].url == f"{BASE}/api/v1/jobs/many/artefacts/f00000.txt"
    assert result.artefacts_left_out == FILES - RESULT_LINKS
    assert result.artefacts_listing == f"{BASE}/api/v1/jobs/many/artefacts"
    # Without base_url: no links, nothing counted (as before).
    assert await _keeper(state_dir, "").links(_job(), "h") == {}


async def test_the_console_page_lists_a_bounded_number_and_still_finds_the_evidence(
    state_dir: Path,
) -> None:
    from labd.console.artefacts import PAGE_FILES, ArtefactFiles
    from labd.console.evidence import evidence_section

    html = await evidence_section(ArtefactFiles(state_dir / "jobs"), {}, "many")
    assert html.count("<tr><td><a href=") == PAGE_FILES
    assert f"{FILES - PAGE_FILES:,} more are not listed here" in html
    assert f"/api/v1/jobs/many/artefacts?offset={PAGE_FILES}" in html
    # The video sorts after every file listed, and is the evidence all the same.
    assert "<video controls" in html and "iteration-7/video.webm" in html
    assert len(html) < 100_000


async def test_an_over_large_limit_is_capped_and_only_ascii_integers_are_taken(
    state_dir: Path,
) -> None:
    get = _listing(state_dir)

    for limit in (str(ARTEFACTS_PAGE_MAX + 1), "2147483649", "99999999999999999999", "9" * 5000):
        status, page = await get(f"?limit={limit}")
        assert status == 200, (limit[:30], page)
        assert page["limit"] == ARTEFACTS_PAGE_MAX and len(page["artefacts"]) == FILES
    for bad in ("0", "-1", "-99999999999999999999", "%EF%BC%91", "%201", "1_0", "1%0A", "", "0x10"):
        status, page = await get(f"?limit={bad}")
        assert status == 400, (bad, page)
    status, page = await get("?offset=%EF%BC%91")
    assert status == 400 and "not an integer" in page["errors"][0]
    status, page = await get("?offset=-5")
    assert status == 400 and "-5 is outside 0..2147483648" in page["errors"][0]
