"""`voice-service models`: the catalogue of models an operator may pull from the Hugging
Face Hub, and the ones pulled into the models dir (VOICE_SERVICE_MODELS_DIR)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from voice_service.cli.shared import PLAIN_HELP, JsonFlag, emit, refuse

if TYPE_CHECKING:
    from voice_service.models.catalogue import CatalogueModel
    from voice_service.settings import Settings

models_app = typer.Typer(
    help="Models pulled from the Hugging Face Hub: list, pull, verify, remove, export, import.",
    **PLAIN_HELP,
)
ModelName = Annotated[str, typer.Argument(metavar="NAME", help="A name `models list` shows.")]


def _settings() -> Settings:
    from pydantic import ValidationError

    from voice_service.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        refuse(str(exc.errors()[0]["msg"]))


def _models_dir() -> Path:
    return _settings().resolved_models_dir


def _model(name: str) -> CatalogueModel:
    from voice_service.models.catalogue import UnknownModel, model_named

    try:
        return model_named(name)
    except UnknownModel as exc:
        refuse(str(exc))


def _row(models_dir: Path, model: CatalogueModel) -> dict[str, Any]:
    from voice_service.models import store
    from voice_service.models.catalogue import USED_WITH

    return {
        "name": model.name,
        "kind": model.kind,
        "bytes": model.size,
        "status": store.status(models_dir, model),
        "path": str(store.model_dir(models_dir, model)),
        "used_with": USED_WITH[model.kind],
        "repo": model.repo,
        "revision": model.revision,
        "description": model.description,
    }


@models_app.command("list")
def list_models(as_json: JsonFlag = False) -> None:
    """Every model the catalogue has, whether it is pulled here, and whether this node's
    settings offer it (VOICE_SERVICE_WHISPER_MODELS, whose first is the default, and
    VOICE_SERVICE_PIPER_VOICES)."""
    from voice_service.models.catalogue import catalogue

    settings = _settings()
    models_dir = settings.resolved_models_dir
    whisper = settings.whisper_model_names
    offered = (*whisper, *settings.piper_voice_names)
    rows = [
        _row(models_dir, model)
        | {"offered": model.name in offered, "default": model.name == whisper[0]}
        for model in catalogue().values()
    ]
    lines = [f"Models dir {models_dir}; offered: {', '.join(offered)}"]
    lines += [
        f"{row['name']:<20} {row['kind']:<8} {row['bytes'] / 1e9:6.2f} GB  {row['status']:<10} "
        f"{'default' if row['default'] else 'offered' if row['offered'] else '':<8} "
        f"{row['description']}"
        for row in rows
    ]
    emit(as_json, rows, "\n".join(lines))


@models_app.command()
def pull(name: ModelName, as_json: JsonFlag = False) -> None:
    """Fetch a model at the catalogue's commit, each file checked by size and SHA-256.
    Files already here and right are kept, so a pull cut short goes on where it stopped.
    Honours HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE."""
    from voice_service.models import store

    model = _model(name)
    models_dir = _models_dir()
    try:
        store.pull(models_dir, model)
    except store.PullFailed as exc:
        refuse(str(exc).splitlines()[0])
    row = _row(models_dir, model)
    emit(
        as_json,
        row,
        f"Pulled {model.name} ({model.repo} at {model.revision[:12]}) into {row['path']}\n"
        f"Offer it: add {model.name} to {row['used_with']}"
        + (" (the first is the default)" if model.kind == "whisper" else ""),
    )


@models_app.command()
def verify(
    names: Annotated[
        list[str] | None,
        typer.Argument(metavar="[NAME]...", help="Models to check (default: every pulled one)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Read every file of the pulled models and compare it with the catalogue: exit 1,
    naming each file that differs and the command that repairs it."""
    from voice_service.models import store
    from voice_service.models.catalogue import catalogue

    models_dir = _models_dir()
    if names:
        models = [_model(name) for name in names]
    else:
        models = [m for m in catalogue().values() if store.status(models_dir, m) != "absent"]
    found = {
        model.name: [str(p) for p in store.problems(store.model_dir(models_dir, model), model)]
        for model in models
    }
    lines = [f"{name}: ok" for name, problems in found.items() if not problems]
    for name, problems in found.items():
        lines += [
            f"{name}: {problem}; repair: voice-service models pull {name}" for problem in problems
        ]
    emit(as_json, found, "\n".join(lines) or "no models pulled")
    if any(found.values()):
        raise typer.Exit(1)


@models_app.command()
def remove(name: ModelName, as_json: JsonFlag = False) -> None:
    """Delete a pulled model's files."""
    from voice_service.models import store

    model = _model(name)
    removed = store.remove(_models_dir(), model)
    said = f"Removed {name}" if removed else f"{name} was not pulled"
    emit(as_json, {"name": name, "removed": removed}, said)


@models_app.command()
def export(
    names: Annotated[list[str], typer.Argument(metavar="NAME", help="Pulled models.")],
    archive: Annotated[Path, typer.Argument(metavar="FILE", help="The tar file to write.")],
    as_json: JsonFlag = False,
) -> None:
    """Write pulled models into one file, for `models import` on a machine without the
    Hub."""
    from voice_service.models import store

    models = [_model(name) for name in names]
    try:
        store.export(_models_dir(), models, archive)
    except store.PullFailed as exc:
        refuse(str(exc))
    said = f"Wrote {', '.join(names)} into {archive} ({archive.stat().st_size / 1e9:.2f} GB)"
    emit(as_json, {"names": names, "file": str(archive), "bytes": archive.stat().st_size}, said)


@models_app.command("import")
def import_models(
    archive: Annotated[Path, typer.Argument(metavar="FILE", help="What `models export` wrote.")],
    as_json: JsonFlag = False,
) -> None:
    """Take in the models a `models export` file holds, every file checked against the
    catalogue (no network used)."""
    from voice_service.models import store

    models_dir = _models_dir()
    try:
        models = store.import_archive(models_dir, archive)
    except store.ImportRefused as exc:
        refuse(str(exc))
    rows = [_row(models_dir, model) for model in models]
    said = "\n".join(f"Imported {row['name']} into {row['path']}" for row in rows)
    emit(as_json, rows, said)
