"""`voice-service serve`: the API on a socket bound first, the cluster joined, a banner.

What it runs on (uvicorn, the database, the settings) is imported once it runs, not when
the CLI starts (cli/shared.py says why)."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from voice_service.cli.shared import JsonFlag, emit, run_work

if TYPE_CHECKING:
    import uvicorn
    from pydantic import ValidationError
    from sqlalchemy.ext.asyncio import AsyncSession

    from voice_service.settings import Settings

# --- serve -------------------------------------------------------------------------------


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 8000,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1, help="Processes (default: VOICE_SERVICE_WORKERS or 1; > 1 needs REDIS_URL)."
        ),
    ] = None,
    wyoming: Annotated[
        list[str] | None,
        typer.Option(
            "--wyoming",
            metavar="[HOST:]PORT=KEY_ID",
            help="Also serve Home Assistant's Wyoming protocol on HOST:PORT (HOST "
            "127.0.0.1 unless given), every request made as the API key KEY_ID. Repeatable; "
            "replaces VOICE_SERVICE_WYOMING.",
        ),
    ] = None,
    wyoming_zeroconf: Annotated[
        bool,
        typer.Option(
            "--wyoming-zeroconf",
            help="Announce the Wyoming listeners that others can reach over zeroconf, so "
            "Home Assistant discovers them.",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Start the API on http://HOST:PORT/api/v1 (migrates the database first)."""
    from voice_service.cli import launch
    from voice_service.kit import serve_lock
    from voice_service.kit.metrics.multiprocess import share_between_workers

    # Each process reads its settings anew: the Wyoming flags reach them as variables.
    if wyoming:
        os.environ["VOICE_SERVICE_WYOMING"] = ",".join(wyoming)
    if wyoming_zeroconf:
        os.environ["VOICE_SERVICE_WYOMING_ZEROCONF"] = "true"
    settings = _settings(workers)
    _check_files(settings)
    config = _uvicorn_config(settings, host, port)
    # Before anything slow, printed or written (a busy port leaves no trace); the lock
    # after the port, since it may have to make the data dir.
    try:
        sock = launch.listen(host, port, config.backlog)
        for binding in settings.wyoming_listeners:
            launch.check_free(binding.host, binding.port, "--wyoming")
        serve_lock.hold(settings)  # held until this process exits
    except (serve_lock.ServeLocked, launch.CannotListen) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    url_host = f"[{host}]" if ":" in host else host
    base_url = f"http://{url_host}:{sock.getsockname()[1]}/api/v1"
    first = run_work(lambda session: _bootstrap(session, settings), create=True)
    data = _data_served(settings)
    listeners = [binding.address for binding in settings.wyoming_listeners]
    welcome = _welcome(base_url, data, first, _self_command(settings.data_dir))
    if listeners:
        welcome += f"\nWyoming (Home Assistant) on {', '.join(listeners)}"
    emit(as_json, {"base_url": base_url, **data, **first, "wyoming": listeners}, welcome)
    sys.stdout.flush()
    # uvicorn drains on SIGTERM, then raises the signal again with the handler it found
    # installed: with this one, a node that drained exits 0 rather than "killed by SIGTERM".
    signal.signal(signal.SIGTERM, _exit_drained)
    # Before uvicorn spawns the workers: they inherit where to keep their metrics.
    share_between_workers(settings.data_dir, settings.workers)
    raise typer.Exit(launch.run(config, sock))


def _settings(workers: int | None) -> Settings:
    """The node's settings, its process count decided; exit 2 on a wrong one."""
    from pydantic import ValidationError

    from voice_service.settings import Settings

    try:
        settings = Settings()
    except ValidationError as exc:
        typer.echo(f"error: {_first_problem(exc)}", err=True)
        raise typer.Exit(2) from None
    if workers is None:
        workers = settings.workers
    # Each process reads its settings anew: they learn the node's process count from this
    # (the connection budget and the rate limit's per-process share while Redis is down).
    os.environ["VOICE_SERVICE_WORKERS"] = str(workers)
    settings = settings.model_copy(update={"workers": workers})
    if workers > 1 and not settings.redis_url:
        typer.echo(
            "error: --workers > 1 needs VOICE_SERVICE_REDIS_URL so that every process "
            "shares one rate-limit budget per key.",
            err=True,
        )
        raise typer.Exit(2)
    if workers > 1 and settings.is_sqlite:
        typer.echo("note: several workers on SQLite serialize their writes.", err=True)
    return settings


def _check_files(settings: Settings) -> None:
    """Each process reads the providers file, loads the speaker model and the Whisper models
    again; a mistake in one is one line here, before the port."""
    if settings.stt_engine_names:
        from voice_service.inference.transcribers import offered_choices, start_problem

        for choice in offered_choices(settings):
            if problem := start_problem(choice):
                typer.echo(f"error: VOICE_SERVICE_WHISPER_MODELS: {problem}", err=True)
                raise typer.Exit(1)
    if "piper" in settings.tts_engine_names:
        from voice_service.models.catalogue import model_named
        from voice_service.models.store import start_problem as voice_problem

        for name in settings.piper_voice_names:
            if problem := voice_problem(settings.resolved_models_dir, model_named(name)):
                typer.echo(f"error: VOICE_SERVICE_PIPER_VOICES: {problem}", err=True)
                raise typer.Exit(1)
    if settings.providers_file is not None:
        from voice_service.inference.providers.config import ProvidersFileError, load_providers

        try:
            load_providers(settings.providers_file)
        except ProvidersFileError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
    if settings.speaker_model is not None:
        from voice_service.engines.speaker_model import SpeakerModel, UnusableSpeakerModel

        try:
            SpeakerModel(settings.speaker_model)
        except UnusableSpeakerModel as exc:
            typer.echo(f"error: VOICE_SERVICE_SPEAKER_MODEL: {exc}", err=True)
            raise typer.Exit(1) from None


def _uvicorn_config(settings: Settings, host: str, port: int) -> uvicorn.Config:
    import uvicorn

    from voice_service.kit.logs import log_config

    return uvicorn.Config(
        "voice_service.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=settings.workers,
        # Our protocol answers malformed HTTP with the envelope, times out slow headers and
        # caps connections; it takes its settings and log writer from the lifespan.
        http="voice_service.web.server:HttpProtocol",
        # A node that stops lets open WebSocket sessions finish first (web/server.py).
        ws="voice_service.web.server:WebSocketProtocol",
        lifespan="on",
        # SIGTERM: stop accepting, let requests in flight finish, then the lifespan's
        # shutdown flushes the request log before the process exits 0.
        timeout_graceful_shutdown=settings.drain_timeout_seconds,
        # Uvicorn's own reading of X-Forwarded-For / -Proto, from these addresses only.
        proxy_headers=bool(settings.forwarded_allow_ips.strip()),
        forwarded_allow_ips=settings.forwarded_allow_ips,
        access_log=False,  # the request line is ours (logs.log_request)
        log_config=log_config(settings.log_format),
    )


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    name = "VOICE_SERVICE_" + "_".join(str(part) for part in error["loc"]).upper()
    return f"{name}: {error['msg']}"


def _exit_drained(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


async def _bootstrap(session: AsyncSession, settings: Settings) -> dict[str, str]:
    """Check that this node agrees with its cluster; on an empty database make the first
    organization and its key, so curl works at once. Nodes starting together take turns
    (the start-up lock), so exactly one of them makes it."""
    from voice_service.kit import cluster
    from voice_service.tenancy import service as tenancy
    from voice_service.tenancy.keys import SecretHasher, load_pepper

    pepper = load_pepper(settings)
    await cluster.join(session, settings, pepper)
    first = await cluster.recorded(session, cluster.FIRST_ORGANIZATION)
    if first is not None:
        org, account = await tenancy.org_with_account(session, first)
        return {"org_id": org.id, "account_id": account.id}
    if await tenancy.count_orgs(session):  # a database from before the first was recorded
        return {}
    org = await tenancy.create_org(session, "default", None, None)
    await cluster.claim(session, cluster.FIRST_ORGANIZATION, org.id)
    created = await tenancy.create_key(session, SecretHasher(pepper), org.id, "first key", None)
    return {
        "org_id": org.id,
        "account_id": org.account_id,
        "key_id": created.key.id,
        "api_key": created.secret,
    }


def _self_command(data_dir: Path) -> str:
    """This CLI as the banner's reader can paste it into a shell in the same directory:
    bare when PATH finds this very script, else the script's path (the virtual
    environment's bin is rarely on PATH), plus the data dir when it is not the default."""
    script = Path(sys.argv[0])
    if script.name != "voice-service":  # python -m voice_service
        script = Path(sys.executable).parent / "voice-service"
    if not script.is_file():
        command = f"{shlex.quote(sys.executable)} -m voice_service"
    elif (found := shutil.which("voice-service")) and Path(found).samefile(script):
        command = "voice-service"
    else:
        command = shlex.quote(_from_cwd(script.absolute()))
    if data_dir.resolve() != Path("data").resolve():
        command += f" --data-dir {shlex.quote(str(data_dir))}"
    return command


def _from_cwd(path: Path) -> str:
    """`path` relative to the working directory when it lies below it (shorter to read),
    with a ./ so that a shell runs it rather than search PATH; else as it is."""
    try:
        relative = path.relative_to(Path.cwd())
    except ValueError:
        return str(path)
    return str(relative) if relative.parent != Path() else f"./{relative}"


def _data_served(settings: Settings) -> dict[str, str]:
    """Where this node keeps its data: a `serve` started in another folder says so, not
    just a new key. A database URL's password is not printed."""
    from sqlalchemy.engine import make_url

    database = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
    return {"data_dir": str(settings.data_dir.resolve()), "database": database}


def _welcome(base_url: str, data: dict[str, str], first: dict[str, str], command: str) -> str:
    from voice_service.core.ids import catalogue_voice_id
    from voice_service.engines.catalog import CLONE_BASE_VOICE

    voice_id = catalogue_voice_id(CLONE_BASE_VOICE)  # the English voice every install has
    console = base_url.removesuffix("/api/v1") + "/console/"
    serving = f"Data dir {data['data_dir']}, database {data['database']}"
    if "api_key" not in first:
        org_id = first.get("org_id", "ORG_ID")
        account_id = first.get("account_id", "ACCOUNT_ID")
        return (
            f"Voice Service on {base_url} (console: {console})\n"
            f"{serving}\n"
            f"The first organization is {org_id} in account {account_id} "
            "(its key was shown when it was made).\n"
            f"Make a key with: {command} keys create {org_id}  "
            f"({command} orgs create NAME makes an organization)\n"
            f"Make a console user with: {command} users create {account_id} EMAIL"
        )
    return f"""Voice Service on {base_url} (console: {console})
{serving}
Created organization {first["org_id"]} in account {first["account_id"]}
and its first API key (shown only now):

    {first["api_key"]}

Sign in to the console: {command} users create {first["account_id"]} you@example.com

Try it:
    export VOICE_API_KEY={first["api_key"]}
    curl -s {base_url}/voices -H "Authorization: Bearer $VOICE_API_KEY"
    curl -s {base_url}/text-to-speech -H "Authorization: Bearer $VOICE_API_KEY" \\
      -H 'Content-Type: application/json' -o hello.mp3 \\
      -d '{{"text": "Welcome to Voice Service.", "voice_id": "{voice_id}"}}'
"""
