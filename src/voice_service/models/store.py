"""The models dir: MODELS_DIR/KIND/NAME/ holds a pulled model's files as its repository has
them, taken at the catalogue's commit through huggingface_hub (its progress bars, retries
and HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE), and a receipt written once every file had the
catalogue's size and SHA-256. A model without its receipt is not pulled."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal

from voice_service.models.catalogue import CatalogueModel, ModelFile

RECEIPT: Final = "pulled.json"
_CHUNK: Final = 1 << 20

Status = Literal["pulled", "absent", "incomplete"]


class PullFailed(Exception):
    """A pull that ended without the model: one line that says why."""


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    what: str  # "missing", "is N bytes, not M", "has another SHA-256"

    def __str__(self) -> str:
        return f"{self.file} {self.what}"


def model_dir(models_dir: Path, model: CatalogueModel) -> Path:
    return models_dir / model.kind / model.name


def status(models_dir: Path, model: CatalogueModel) -> Status:
    directory = model_dir(models_dir, model)
    if (directory / RECEIPT).is_file():
        return "pulled"
    return "incomplete" if directory.exists() else "absent"


def problems(models_dir: Path, model: CatalogueModel) -> list[Problem]:
    """What differs from the catalogue, file by file (every file is read and hashed)."""
    directory = model_dir(models_dir, model)
    return [found for file in model.files if (found := _problem(directory, file))]


def _problem(directory: Path, file: ModelFile) -> Problem | None:
    path = directory / file.name
    if not path.is_file():
        return Problem(file.name, "is missing")
    size = path.stat().st_size
    if size != file.size:
        return Problem(file.name, f"is {size} bytes, not {file.size}")
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    if digest.hexdigest() != file.sha256:
        return Problem(file.name, "has another SHA-256 than the catalogue's")
    return None


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
    receipt = {
        "name": model.name,
        "repo": model.repo,
        "revision": model.revision,
        "files": {file.name: {"bytes": file.size, "sha256": file.sha256} for file in model.files},
        "pulled_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (directory / RECEIPT).write_text(json.dumps(receipt, indent=2) + "\n")
    return directory


def remove(models_dir: Path, model: CatalogueModel) -> bool:
    """The model's directory removed; whether there was one."""
    directory = model_dir(models_dir, model)
    if not directory.exists():
        return False
    shutil.rmtree(directory)
    return True
