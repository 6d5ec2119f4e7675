"""The API's heavy answers in pages on a real daemon, and bad paging asked for by name."""

from __future__ import annotations

from tests.integration.http.conftest import TOKENS, Lab


def test_results_and_history_are_paged_and_bad_pages_named(lab: Lab) -> None:
    ci = TOKENS["ci"]
    spec = lab.touch_spec("paged") | {"iterations": 5, "warmup": 1}
    assert lab.request("POST", "/api/v1/jobs", {"id": "p", "spec": spec}, token=ci).status == 201
    assert lab.wait_finished("p", ci)["state"] == "succeeded"
    page = lab.request("GET", "/api/v1/jobs/p/results?limit=4", token=ci).body
    assert (len(page["iterations"]), page["total"], page["next"]) == (4, 6, 4)
    assert "summary" in page
    rest = lab.request("GET", "/api/v1/jobs/p/results?offset=4&limit=4", token=ci).body
    assert [it["index"] for it in rest["iterations"]] == [4, 5] and rest["next"] is None
    for query, problem in [
        ("limit=0", "limit: 0 is outside 1..2147483648"),
        ("offset=-1", "offset: -1 is outside 0..2147483648"),
        ("limit=ten", "limit: not an integer: 'ten'"),
    ]:
        answer = lab.request("GET", f"/api/v1/jobs/p/results?{query}", token=ci)
        assert (answer.status, answer.body["errors"]) == (400, [problem])
    history = lab.request("GET", "/api/v1/history?suite=attack&test=paged&limit=1", token=ci).body
    assert history["next"] is None and len(history["series"]) >= 1
    answer = lab.request("GET", "/api/v1/history?suite=attack&test=paged&before=nope", token=ci)
    assert (answer.status, answer.body["errors"]) == (400, ["before: no job 'nope'"])
    for query, problem in [
        ("suite=a/b&test=paged", "suite 'a/b' holds '/'"),
        ("suite=attack&test=%00", "test '\\x00' holds '\\x00'"),
        ("suite=attack&test=paged&before=../p", "before '../p' holds '/'"),
    ]:
        answer = lab.request("GET", f"/api/v1/history?{query}", token=ci)
        assert answer.status == 400 and answer.body["errors"][0].startswith(problem), answer.body
