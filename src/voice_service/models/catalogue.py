"""The catalogue of models an operator may pull (catalogue.toml): a Hub repository at a
pinned commit each, with every file's size and SHA-256."""

from __future__ import annotations

import functools
import importlib.resources
import tomllib
from dataclasses import dataclass
from typing import Final

# What each kind of model is for: the setting that names the pulled ones a node offers.
USED_WITH: Final = {
    "whisper": "VOICE_SERVICE_WHISPER_MODELS",
    "piper": "VOICE_SERVICE_PIPER_VOICES",
}


@dataclass(frozen=True, slots=True)
class ModelFile:
    name: str  # the path in the repository
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class CatalogueModel:
    name: str  # what `models pull` is given: "large-v3-turbo"
    kind: str  # a key of USED_WITH
    repo: str  # "owner/name" on the Hub
    revision: str  # the commit the files are taken at
    description: str
    files: tuple[ModelFile, ...]

    @property
    def size(self) -> int:
        return sum(file.size for file in self.files)


class UnknownModel(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"no model {name!r} in the catalogue; it has: {', '.join(sorted(catalogue()))}"
        )


@functools.cache
def catalogue() -> dict[str, CatalogueModel]:
    """Every model by name, in the file's order."""
    text = (importlib.resources.files(__package__) / "catalogue.toml").read_text()
    models: dict[str, CatalogueModel] = {}
    for kind, entries in tomllib.loads(text).items():
        for name, entry in entries.items():
            files = tuple(ModelFile(f["name"], f["bytes"], f["sha256"]) for f in entry["files"])
            models[name] = CatalogueModel(
                name, kind, entry["repo"], entry["revision"], entry["description"], files
            )
    return models


def names_of(kind: str) -> list[str]:
    """The catalogue's models of `kind`, in the file's order."""
    return [name for name, model in catalogue().items() if model.kind == kind]


def model_named(name: str) -> CatalogueModel:
    try:
        return catalogue()[name]
    except KeyError:
        raise UnknownModel(name) from None
