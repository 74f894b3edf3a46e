"""The console's usage page lists endpoints in the vocabulary's order (text-to-speech,
speech-to-text, asr, translation, voices/clone), whichever was used first and whichever
billed the most units."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.helpers import speech_clips as clips
from tests.helpers.console import Customer, cli, signed_in_client
from tests.helpers.servers import Server
from voice_service.core.vocabulary import UsageEndpoint


def _column(html: str, caption: str, cell: str) -> list[str]:
    table = re.search(rf"<caption>{caption}</caption>(.*?)</table>", html, re.DOTALL)
    assert table is not None, f"no table {caption!r}"
    return re.findall(cell, table.group(1))


def test_usage_lists_endpoints_in_the_vocabularys_order(
    server: Server, alice: Customer, tmp_path: Path
) -> None:
    org = cli(server, "orgs", "create", "Usage order", "--account", alice.account_id)
    key = cli(server, "keys", "create", org["id"])["secret"]
    headers = {"Authorization": f"Bearer {key}"}
    clip = clips.write_audio(tmp_path / "clip.wav", clips.english_speech(), "wav-s16")
    # Used first, and billed more units (seconds of a 4 s clip against 3 characters):
    # neither the order of use, of units nor of names (asr < text-to-speech) is the page's.
    with clip.open("rb") as audio:
        answered = httpx.post(
            f"{server.base_url}/asr",
            headers=headers,
            files={"file": ("clip.wav", audio, "audio/wav")},
            timeout=120,
        )
    assert answered.status_code == 200, answered.text
    voice = httpx.get(f"{server.base_url}/voices", headers=headers, timeout=60).json()
    spoken = httpx.post(
        f"{server.base_url}/text-to-speech",
        headers=headers,
        json={"text": "Hi.", "voice_id": voice["voices"][0]["id"]},
        timeout=120,
    )
    assert spoken.status_code == 200, spoken.text

    expected = [UsageEndpoint.TEXT_TO_SPEECH.value, UsageEndpoint.ASR.value]
    with signed_in_client(server, alice.email) as client:
        page = client.get(f"/console/orgs/{org['id']}/usage").text
        download = client.get(f"/console/orgs/{org['id']}/usage.csv").text
    units = dict(
        zip(
            _column(page, "Totals", r"<tr><td>([^<]+)</td>"),
            map(int, _column(page, "Totals", r'<td class="num">(\d+)</td>')),
            strict=True,
        )
    )
    assert units["asr"] > units["text-to-speech"]
    assert list(units) == expected
    assert _column(page, "Units per day", r"<tr><td>[\d-]+</td><td>([^<]+)</td>") == expected
    legend = re.search(r'<ul class="legend">(.*?)</ul>', page, re.DOTALL)
    assert legend is not None
    assert re.findall(r"</svg>([^<]+)</li>", legend.group(1)) == expected
    assert re.findall(r'<span class="muted small">([^<]+)</span><strong>', page) == expected
    assert [line.split(",")[1] for line in download.splitlines()[1:]] == expected
