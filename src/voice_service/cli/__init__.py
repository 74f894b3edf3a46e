"""voice-service: run the API and administer tenants. Every command accepts --json.

Configuration comes from VOICE_SERVICE_* environment variables (DATA_DIR, DATABASE_URL,
REDIS_URL, KEY_PEPPER, POOL_SIZE, ...; the README lists them all)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from voice_service.cli import models, reports, serve, tenants
from voice_service.cli.shared import PLAIN_HELP

app = typer.Typer(help=__doc__, add_completion=False, **PLAIN_HELP)
app.command()(serve.serve)
app.command()(tenants.audit)
app.command()(reports.usage)
app.command()(reports.requests)
app.command()(reports.clones)
app.add_typer(tenants.orgs_app, name="orgs")
app.add_typer(tenants.accounts_app, name="accounts")
app.add_typer(tenants.keys_app, name="keys")
app.add_typer(tenants.users_app, name="users")
app.add_typer(models.models_app, name="models")


@app.callback()
def _global_options(
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            metavar="PATH",
            help="The service's data dir (default: VOICE_SERVICE_DATA_DIR, else ./data).",
        ),
    ] = None,
) -> None:
    # The variable, not a parameter: settings read it, and so do serve's worker processes.
    if data_dir is not None:
        os.environ["VOICE_SERVICE_DATA_DIR"] = str(data_dir)


def main() -> None:
    app()
