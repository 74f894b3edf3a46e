"""The models dir: MODELS_DIR/KIND/NAME/ holds a pulled model's files as its repository has
them, taken at the catalogue's commit through huggingface_hub (its progress bars, retries
and HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE), and a receipt written once every file had the
catalogue's size and SHA-256. A model without its receipt is not pulled."""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

from voice_service.models.catalogue import CatalogueModel, ModelFile, catalogue

RECEIPT: Final = "pulled.json"
_CHUNK: Final = 1 << 20

Status = Literal["pulled", "absent", "incomplete"]


class PullFailed(Exception):
    """A pull that ended without the model: one line that says why."""


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    what: str  # "is missing", "is N bytes, not M", "has another SHA-256 than ..."

    def __str__(self) -> str:
        return f"{self.file} {self.what}"


def model_dir(models_dir: Path, model: CatalogueModel) -> Path:
    return models_dir / model.kind / model.name


def voice_model(models_dir: Path, model: CatalogueModel) -> Path:
    """Where a pulled Piper voice's ONNX model is (its `.onnx.json` config beside it)."""
    (name,) = [file.name for file in model.files if file.name.endswith(".onnx")]
    return model_dir(models_dir, model) / name


def status(models_dir: Path, model: CatalogueModel) -> Status:
    directory = model_dir(models_dir, model)
    if (directory / RECEIPT).is_file():
        return "pulled"
    return "incomplete" if directory.exists() else "absent"


def problems(directory: Path, model: CatalogueModel) -> list[Problem]:
    """What in `directory` differs from `model`'s catalogue entry, file by file (every file
    is read and hashed)."""
    return [found for file in model.files if (found := _problem(directory, file))]


def _problem(directory: Path, file: ModelFile, *, hashed: bool = True) -> Problem | None:
    """What is wrong with `file` in `directory`: its presence, its size and, when `hashed`,
    its SHA-256 (the whole file read)."""
    path = directory / file.name
    if not path.is_file():
        return Problem(file.name, "is missing")
    size = path.stat().st_size
    if size != file.size:
        return Problem(file.name, f"is {size} bytes, not {file.size}")
    if not hashed:
        return None
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != file.sha256:
        return Problem(file.name, "has another SHA-256 than the catalogue's")
    return None


def size_problems(directory: Path) -> tuple[str, list[Problem]] | None:
    """For a directory `pull` or `import_archive` filled: its model's name and each file
    missing or of another size than its receipt says, without reading any (a node checks
    this at start); None for a directory without a receipt."""
    try:
        receipt = json.loads((directory / RECEIPT).read_text())
        name = str(receipt["name"])
        files = [
            ModelFile(path, int(entry["bytes"]), "") for path, entry in receipt["files"].items()
        ]
    except (OSError, ValueError, LookupError, TypeError, AttributeError):
        return None  # none, or not one that `pull` wrote
    found = [problem for file in files if (problem := _problem(directory, file, hashed=False))]
    return name, found


def start_problem(models_dir: Path, model: CatalogueModel) -> str | None:
    """What keeps a node from loading `model` at start, in one line with the command that
    mends it: not pulled, or a file that differs from the catalogue (every file read)."""
    command = f"voice-service models pull {model.name}"
    if status(models_dir, model) != "pulled":
        return f"{model.name} is not pulled into {models_dir}; run: {command}"
    found = problems(model_dir(models_dir, model), model)
    return f"the {model.name} model's {found[0]}; repair: {command}" if found else None


def pull(models_dir: Path, model: CatalogueModel) -> Path:
    """The model's files fetched where they are missing or differ, checked, and receipted:
    its directory. A file the Hub serves otherwise than the catalogue says is removed, and
    the pull fails (PullFailed)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    directory = model_dir(models_dir, model)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / RECEIPT).unlink(missing_ok=True)
    for file in model.files:
        if _problem(directory, file) is None:
            continue
        (directory / file.name).unlink(missing_ok=True)
        try:
            hf_hub_download(model.repo, file.name, revision=model.revision, local_dir=directory)
        except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
            raise PullFailed(f"{model.repo}@{model.revision[:12]} {file.name}: {exc}") from exc
        if found := _problem(directory, file):
            (directory / file.name).unlink()
            raise PullFailed(f"{model.repo}@{model.revision[:12]}: {found}; removed")
    _write_receipt(directory, model)
    return directory


def _write_receipt(directory: Path, model: CatalogueModel) -> None:
    receipt = {
        "name": model.name,
        "repo": model.repo,
        "revision": model.revision,
        "files": {file.name: {"bytes": file.size, "sha256": file.sha256} for file in model.files},
        "pulled_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (directory / RECEIPT).write_text(json.dumps(receipt, indent=2) + "\n")


def remove(models_dir: Path, model: CatalogueModel) -> bool:
    """The model's directory removed; whether there was one."""
    directory = model_dir(models_dir, model)
    if not directory.exists():
        return False
    shutil.rmtree(directory)
    return True


class ImportRefused(Exception):
    """An archive that is not what `export` writes, or whose files differ: one line."""


def export(models_dir: Path, models: list[CatalogueModel], archive: Path) -> None:
    """The pulled `models` into one tar file, KIND/NAME/FILE each, for `import_archive` on a
    machine without the Hub. Refuses (PullFailed) a model that is not pulled."""
    for model in models:
        if status(models_dir, model) != "pulled":
            raise PullFailed(
                f"{model.name} is not pulled here (voice-service models pull {model.name})"
            )
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w") as tar:
        for model in models:
            directory = model_dir(models_dir, model)
            for name in [file.name for file in model.files]:
                tar.add(directory / name, arcname=f"{model.kind}/{model.name}/{name}")
    partial.replace(archive)


def import_archive(models_dir: Path, archive: Path) -> list[CatalogueModel]:
    """The models an `export` archive holds, each file checked against the catalogue before
    a byte of it is written, then read back and hashed; receipted. Anything else in the
    archive (another path, a link, a size the catalogue does not give) refuses it whole."""
    by_path = {
        f"{model.kind}/{model.name}/{file.name}": (model, file)
        for model in catalogue().values()
        for file in model.files
    }
    if not archive.is_file():
        raise ImportRefused(f"no file {archive}")
    try:
        with tarfile.open(archive, "r:") as tar:
            models = _extract(tar, archive, models_dir, by_path)
    except tarfile.TarError as exc:
        raise ImportRefused(f"{archive} is not an archive `models export` wrote: {exc}") from exc
    for model in models:
        directory = model_dir(models_dir, model)
        if found := problems(directory, model):
            for problem in found:
                (directory / problem.file).unlink(missing_ok=True)
            raise ImportRefused(f"{archive}: {model.name}: {found[0]}; removed")
        _write_receipt(directory, model)
    return models


def _extract(
    tar: tarfile.TarFile,
    archive: Path,
    models_dir: Path,
    by_path: dict[str, tuple[CatalogueModel, ModelFile]],
) -> list[CatalogueModel]:
    """The archive's files written into their models' directories once every member is
    known to be one: the models it held."""
    members = tar.getmembers()
    for member in members:
        known = by_path.get(member.name)
        if known is None or not member.isfile():
            raise ImportRefused(f"{archive}: {member.name!r} is no model file the catalogue has")
        if member.size != known[1].size:
            raise ImportRefused(
                f"{archive}: {member.name} is {member.size} bytes, not {known[1].size}"
            )
    models = list(
        {by_path[member.name][0].name: by_path[member.name][0] for member in members}.values()
    )
    for model in models:
        directory = model_dir(models_dir, model)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / RECEIPT).unlink(missing_ok=True)
    for member in members:
        model, file = by_path[member.name]
        source = tar.extractfile(member)
        if source is None:  # not for a regular file, which every member was found to be
            raise ImportRefused(f"{archive}: {member.name} cannot be read")
        with source, (model_dir(models_dir, model) / file.name).open("wb") as target:
            shutil.copyfileobj(source, target, _CHUNK)
    return models
