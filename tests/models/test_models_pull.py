"""`voice-service models`, as an operator runs it, against a loopback server that speaks the
Hub's file routes (tests/helpers/hub.py) and serves the packaged Whisper base: the real
files, at the catalogue's commit, checked by the catalogue's sizes and SHA-256; a download
cut short resumed; an altered file named with the command that repairs it; files the Hub
serves otherwise refused; export and import with no Hub; and a pulled model transcribing a
real person."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from bench.hub import BASE, Hub, answer, models, running_hub
from bench.speech_set import real_clips

from tests.helpers.servers import serve_refusal


def test_pull_fetches_the_pinned_files_checks_them_and_lists_the_model(
    tmp_path: Path, hub: Hub
) -> None:
    listed = {row["name"]: row for row in answer(models(tmp_path, hub, "list", "--json"))}
    assert listed["base"]["status"] == "absent"
    assert (listed["base"]["offered"], listed["base"]["default"]) == (True, True)  # packaged
    assert listed["small"]["offered"] is False
    assert {"large-v3-turbo", "large-v3", "small"} <= set(listed)
    pulled = answer(models(tmp_path, hub, "pull", "base", "--json"))
    directory = Path(pulled["path"])
    assert directory == tmp_path / "models" / "whisper" / "base"
    assert pulled["status"] == "pulled"
    assert pulled["used_with"] == "VOICE_SERVICE_WHISPER_MODELS"
    for file in BASE.files:
        assert (directory / file.name).stat().st_size == file.size
        # Asked at the pinned commit, never at a branch.
        assert [path for method, path, _ in hub.seen if path.endswith(file.name)] == [
            f"/{BASE.repo}/resolve/{BASE.revision}/{file.name}"
        ] * 2  # HEAD, then GET
    receipt = json.loads((directory / "pulled.json").read_text())
    assert receipt["revision"] == BASE.revision
    assert receipt["files"]["model.bin"]["sha256"] == BASE.files[1].sha256
    assert answer(models(tmp_path, hub, "verify", "--json")) == {"base": []}
    # Pulled again: everything is here and right, nothing is fetched.
    seen = len(hub.seen)
    answer(models(tmp_path, hub, "pull", "base", "--json"))
    assert len(hub.seen) == seen


def test_a_download_cut_short_goes_on_from_where_it_stopped(tmp_path: Path, hub: Hub) -> None:
    hub.cut_after["model.bin"] = 50_000_000
    answer(models(tmp_path, hub, "pull", "base", "--json"))
    first, then = hub.gets("model.bin")
    # The second asks for the rest: from what the client had written of the 50 MB it got.
    assert first is None and then is not None
    assert 0 < int(then.removeprefix("bytes=").removesuffix("-")) <= 50_000_000
    assert answer(models(tmp_path, hub, "verify", "base", "--json")) == {"base": []}


def test_an_altered_file_is_named_with_the_command_that_repairs_it(
    tmp_path: Path, hub: Hub
) -> None:
    directory = Path(answer(models(tmp_path, hub, "pull", "base", "--json"))["path"])
    with (directory / "model.bin").open("r+b") as model:
        model.seek(1000)
        byte = model.read(1)
        model.seek(1000)
        model.write(bytes([byte[0] ^ 0xFF]))
    (directory / "vocabulary.txt").write_text("truncated")
    checked = models(tmp_path, hub, "verify")
    assert checked.returncode == 1
    assert checked.stdout.splitlines() == [
        "base: model.bin has another SHA-256 than the catalogue's; "
        "repair: voice-service models pull base",
        "base: vocabulary.txt is 9 bytes, not 459861; repair: voice-service models pull base",
    ]
    seen = len(hub.seen)
    answer(models(tmp_path, hub, "pull", "base", "--json"))
    fetched = {path.rsplit("/", 1)[1] for method, path, _ in hub.seen[seen:] if method == "GET"}
    assert fetched == {"model.bin", "vocabulary.txt"}
    assert answer(models(tmp_path, hub, "verify", "base", "--json")) == {"base": []}


def test_a_file_the_hub_serves_otherwise_is_refused_and_removed(
    tmp_path: Path, base_files: Path
) -> None:
    other = tmp_path / "config.json"
    other.write_text((base_files / "config.json").read_text().replace("}", ' , "x": 1}', 1))
    files = {(BASE.repo, BASE.revision, f.name): base_files / f.name for f in BASE.files}
    files[BASE.repo, BASE.revision, "config.json"] = other
    data_dir = tmp_path / "data"
    with running_hub(files) as hub:
        refused = models(data_dir, hub, "pull", "base")
    assert refused.returncode == 1
    assert refused.stderr.strip().startswith(
        f"error: {BASE.repo}@{BASE.revision[:12]}: config.json is"
    )
    directory = data_dir / "models" / "whisper" / "base"
    assert not (directory / "config.json").exists() and not (directory / "pulled.json").exists()
    assert answer(models(data_dir, hub, "list", "--json"))[1]["status"] == "incomplete"


def test_list_says_which_models_the_nodes_settings_offer(tmp_path: Path) -> None:
    offering = {"VOICE_SERVICE_WHISPER_MODELS": "large-v3-turbo,base"}
    done = models(tmp_path, None, "list", offline=True, settings=offering)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"Models dir {tmp_path / 'models'}; offered: large-v3-turbo, base"
    marks = {line.split()[0]: {"default", "offered"} & set(line.split()) for line in lines[1:]}
    assert marks["large-v3-turbo"] == {"default"} and marks["base"] == {"offered"}
    assert marks["small"] == set()


def test_unknown_names_are_refused_with_the_catalogues_names(tmp_path: Path, hub: Hub) -> None:
    refused = models(tmp_path, hub, "pull", "large-v9")
    assert refused.returncode == 1
    assert "no model 'large-v9' in the catalogue; it has: ar_JO-kareem-medium, base," in (
        refused.stderr
    )
    assert hub.seen == []


def test_remove_deletes_a_pulled_model(tmp_path: Path, hub: Hub) -> None:
    answer(models(tmp_path, hub, "pull", "base", "--json"))
    assert answer(models(tmp_path, hub, "remove", "base", "--json"))["removed"] is True
    assert not (tmp_path / "models" / "whisper" / "base").exists()
    assert answer(models(tmp_path, hub, "remove", "base", "--json"))["removed"] is False


def test_a_pulled_whisper_transcribes_a_real_person(tmp_path: Path, hub: Hub) -> None:
    from voice_service.engines.whisper import WhisperEngine

    directory = Path(answer(models(tmp_path, hub, "pull", "base", "--json"))["path"])
    clip = real_clips()[0]
    engine = WhisperEngine(tmp_path, model_dir=directory)
    edits, words = clip.errors(engine.transcribe(clip.audio, language="en").text)
    assert edits <= words // 5


def test_export_then_import_on_a_machine_without_the_hub(tmp_path: Path, hub: Hub) -> None:
    connected, air_gapped = tmp_path / "connected", tmp_path / "air-gapped"
    answer(models(connected, hub, "pull", "base", "--json"))
    archive = tmp_path / "models.tar"
    unpulled = models(connected, hub, "export", "tiny", str(archive))
    assert unpulled.returncode == 1 and "tiny is not pulled here" in unpulled.stderr
    assert not archive.exists()
    answer(models(connected, hub, "export", "base", str(archive), "--json"))
    seen = len(hub.seen)
    offline = models(air_gapped, hub, "import", str(archive), "--json", offline=True)
    (imported,) = answer(offline)
    assert imported["name"] == "base" and imported["status"] == "pulled"
    assert len(hub.seen) == seen  # nothing asked of any hub
    assert answer(models(air_gapped, hub, "verify", "--json", offline=True)) == {"base": []}


def test_an_archive_holding_anything_else_is_refused_whole(
    tmp_path: Path, base_files: Path
) -> None:
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        tar.add(base_files / "config.json", arcname="whisper/base/config.json")
        tar.add(base_files / "config.json", arcname="whisper/base/../../../escaped.json")
    data_dir = tmp_path / "data"
    refused = models(data_dir, None, "import", str(evil), offline=True)
    assert refused.returncode == 1
    assert "'whisper/base/../../../escaped.json' is no model file the catalogue has" in (
        refused.stderr
    )
    assert not (data_dir / "models").exists() and not (tmp_path / "escaped.json").exists()
    altered = tmp_path / "altered.tar"
    changed = tmp_path / "config.json"
    changed.write_bytes((base_files / "config.json").read_bytes().replace(b"{", b"[", 1))
    with tarfile.open(altered, "w") as tar:
        tar.add(changed, arcname="whisper/base/config.json")
    refused = models(data_dir, None, "import", str(altered), offline=True)
    assert refused.returncode == 1
    assert "base: config.json has another SHA-256 than the catalogue's; removed" in refused.stderr
    assert not (data_dir / "models" / "whisper" / "base" / "config.json").exists()


def test_serve_refuses_a_pulled_whisper_cut_short_naming_the_repair(
    tmp_path: Path, hub: Hub
) -> None:
    directory = Path(answer(models(tmp_path, hub, "pull", "base", "--json"))["path"])
    with (directory / "model.bin").open("r+b") as model:
        model.truncate(1_000_000)
    assert serve_refusal(tmp_path, whisper_models="base") == (
        "error: VOICE_SERVICE_WHISPER_MODELS: the base model's model.bin is 1000000 bytes, "
        "not 145217532; repair: voice-service models pull base"
    )


def test_serve_refuses_a_model_it_was_told_to_offer_and_does_not_have(tmp_path: Path) -> None:
    assert serve_refusal(tmp_path, whisper_models="base,large-v3-turbo") == (
        "error: VOICE_SERVICE_WHISPER_MODELS: large-v3-turbo is not pulled into "
        f"{tmp_path / 'models' / 'whisper'}; run: voice-service models pull large-v3-turbo"
    )
