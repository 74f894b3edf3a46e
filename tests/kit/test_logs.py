"""VOICE_SERVICE_LOG_FORMAT=json: every line of a node's log is one JSON object, and each
request's line carries its fields; no secret is ever written."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.helpers.servers import running_server
from tests.helpers.voices import JOE


def test_json_lines_carry_each_request_s_fields_and_no_secret(tmp_path: Path) -> None:
    with running_server(tmp_path, log_format="json") as server:
        auth = {"Authorization": f"Bearer {server.api_key}"}
        with httpx.Client(base_url=server.base_url, timeout=120) as client:
            listed = client.get("/voices", headers=auth)
            spoken = client.post(
                "/text-to-speech", headers=auth, json={"text": "Hi.", "voice_id": JOE}
            )
            refused = client.get("/voices", headers={"Authorization": "Bearer vs_" + "x" * 40})
        assert (listed.status_code, spoken.status_code, refused.status_code) == (200, 200, 401)
    text = server.log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    by_id = {line["request_id"]: line for line in lines if "request_id" in line}
    for response, status, code in ((listed, 200, None), (spoken, 200, None)):
        line = by_id[response.headers["x-request-id"]]
        assert (line["status"], line["error_code"], line["org_id"]) == (status, code, server.org_id)
        assert server.api_key.startswith(line["key_prefix"]) and len(line["key_prefix"]) < 16
        assert line["method"] in ("GET", "POST") and line["path"].startswith("/api/v1/")
        assert isinstance(line["duration_ms"], int)
        assert line["client"] == "127.0.0.1"  # the caller's address
    anonymous = by_id[refused.headers["x-request-id"]]
    assert (anonymous["status"], anonymous["error_code"], anonymous["key_prefix"]) == (
        401,
        "INVALID_API_KEY",
        None,
    )
    assert server.api_key not in text and "x" * 40 not in text


def test_a_refused_websocket_upgrade_is_logged_as_its_request_not_as_an_error(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path, log_format="json") as server:
        url = server.root.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
        with pytest.raises(InvalidStatus) as refused:
            connect(url, additional_headers={"Authorization": "Bearer vs_" + "x" * 40})
        assert refused.value.response.status_code == 401
        request_id = refused.value.response.headers["x-request-id"]
    lines = [json.loads(line) for line in server.log.read_text().splitlines() if line.strip()]
    (logged,) = [line for line in lines if line.get("request_id") == request_id]
    assert (logged["status"], logged["error_code"]) == (401, "INVALID_API_KEY")
    assert [line for line in lines if line["level"] == "ERROR"] == []
