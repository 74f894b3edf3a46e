"""voice-service: run the API and administer tenants. Every command accepts --json.

Configuration comes from VOICE_SERVICE_* environment variables (DATA_DIR, DATABASE_URL,
REDIS_URL, KEY_PEPPER, POOL_SIZE, ...; the README lists them all)."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import date
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, NoReturn, TypeVar

import typer
import uvicorn
from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.books.requestlog.repository import recent_requests
from voice_service.books.usage.period import InvalidPeriod, parse_day, usage_period
from voice_service.books.usage.repository import DailyUsage, daily_usage, totals
from voice_service.cli import launch
from voice_service.console.audit import list_events
from voice_service.core.ids import catalogue_voice_id
from voice_service.core.vocabulary import Scope, Service
from voice_service.inference.providers.config import ProvidersFileError, load_providers
from voice_service.kit import cluster, serve_lock
from voice_service.kit.db import create_engine, run_in_transaction
from voice_service.kit.logs import log_config
from voice_service.kit.metrics.multiprocess import share_between_workers
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy
from voice_service.tenancy import users
from voice_service.tenancy.keys import SecretHasher, load_pepper
from voice_service.tenancy.rate_limits import parse_rate_limit

T = TypeVar("T")

# Click's plain help: Typer's rich boxes print `<bool>` beside every flag.
PLAIN_HELP: Any = {"no_args_is_help": True, "rich_markup_mode": None}
app = typer.Typer(help=__doc__, add_completion=False, **PLAIN_HELP)
orgs_app = typer.Typer(
    help="Organizations: create, list, show, suspend, switch services.", **PLAIN_HELP
)
accounts_app = typer.Typer(help="Accounts (customers owning organizations).", **PLAIN_HELP)
keys_app = typer.Typer(help="API keys: create (secret shown once), revoke, list.", **PLAIN_HELP)
users_app = typer.Typer(
    help="Console users: people of an account who sign in at /console/ with email and password.",
    **PLAIN_HELP,
)
app.add_typer(orgs_app, name="orgs")
app.add_typer(accounts_app, name="accounts")
app.add_typer(keys_app, name="keys")
app.add_typer(users_app, name="users")


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


JsonFlag = Annotated[bool, typer.Option("--json", help="Print only JSON on stdout.")]
# Positional arguments, named alike in every command's help.
OrgId = Annotated[str, typer.Argument(metavar="ORG_ID")]
AccountId = Annotated[str, typer.Argument(metavar="ACCOUNT_ID")]
KeyId = Annotated[str, typer.Argument(metavar="KEY_ID")]
UserId = Annotated[str, typer.Argument(metavar="USER_ID")]
MAX_INT32 = 2**31 - 1
MonthlyUnits = Annotated[
    int | None,
    typer.Option(
        min=0,
        max=MAX_INT32,  # the column's range on PostgreSQL
        help="Billed units allowed per UTC calendar month (default: no cap).",
    ),
]


def _run(work: Callable[[AsyncSession], Awaitable[T]], *, create: bool = False) -> T:
    """Run one unit of work against the configured database, migrated first. Only `serve`
    may `create` it: elsewhere a missing database is a data dir mistaken for another."""

    settings = Settings()
    try:
        if not create:
            _require_database(settings)
        return asyncio.run(run_in_transaction(settings, work))
    except tenancy.UnknownId as exc:
        # A CLI pointed at another database than the service's: say which one it read.
        typer.echo(f"error: {str(exc).rstrip('.')} in {_database(settings)}.", err=True)
        raise typer.Exit(1) from None
    except (cluster.ClusterMismatch, ValueError) as exc:
        typer.echo(f"error: {exc.args[0] if exc.args else exc}", err=True)
        raise typer.Exit(1) from None
    except (OSError, SQLAlchemyError) as exc:
        # A database server that is down, unreachable or refuses us: one line, no traceback.
        _refuse(f"cannot use {_database(settings)}: {_cause(exc)}")


def _cause(exc: BaseException) -> str:
    """The driver's own words, on one line."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_POINT_IT = (
    "Run this command where `voice-service serve` runs, or point it at the service's data "
    "dir with --data-dir PATH or VOICE_SERVICE_DATA_DIR=PATH"
)


def _require_database(settings: Settings) -> None:
    """Exit with a message, creating nothing, unless the database exists (and, on a
    database server, has been migrated by a `serve`)."""
    if not settings.is_sqlite:
        if not asyncio.run(_has_schema(settings)):
            url = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
            _refuse(
                f"the database {url} has no Voice Service tables. Start `voice-service "
                "serve` on it first (it creates them), or set VOICE_SERVICE_DATABASE_URL "
                "to the service's database."
            )
        return
    database = make_url(settings.resolved_database_url).database
    if not database or database == ":memory:" or Path(database).is_file():
        return
    if settings.database_url:
        _refuse(
            f"no Voice Service database at {database} (VOICE_SERVICE_DATABASE_URL); "
            "nothing was created. Set VOICE_SERVICE_DATABASE_URL to the service's database."
        )
    _refuse(
        f"no Voice Service database in the data dir {settings.data_dir.resolve()} (looked for "
        f"{database}); nothing was created. {_POINT_IT}."
    )


async def _has_schema(settings: Settings) -> bool:
    engine = create_engine(settings)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(
                lambda sync: inspect(sync).has_table("alembic_version")
            )
    finally:
        await engine.dispose()


def _refuse(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _database(settings: Settings) -> str:
    if settings.is_sqlite:
        return (
            f"the SQLite database {make_url(settings.resolved_database_url).database} "
            "(--data-dir, VOICE_SERVICE_DATA_DIR or VOICE_SERVICE_DATABASE_URL choose another)"
        )
    url = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
    return f"the database {url}"


def _emit(as_json: bool, data: Any, text: str) -> None:
    typer.echo(json.dumps(data, default=_json_default, indent=2) if as_json else text)


def _json_default(value: object) -> str:
    if isinstance(value, date):  # datetimes too
        return value.isoformat()
    raise TypeError(type(value).__name__)


# --- serve -------------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 8000,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1, help="Processes (default: VOICE_SERVICE_WORKERS or 1; > 1 needs REDIS_URL)."
        ),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Start the API on http://HOST:PORT/api/v1 (migrates the database first)."""
    settings = Settings()
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
    if settings.providers_file is not None:
        try:  # each process reads it again; a mistake is one line here, before the port
            load_providers(settings.providers_file)
        except ProvidersFileError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
    config = uvicorn.Config(
        "voice_service.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        # Our protocol answers malformed HTTP with the envelope, times out slow headers and
        # caps connections; it takes its settings and log writer from the lifespan.
        http="voice_service.web.server:HttpProtocol",
        # A node that stops lets open WebSocket sessions finish first (server.py).
        ws="voice_service.web.server:WebSocketProtocol",
        lifespan="on",
        # SIGTERM: stop accepting, let requests in flight finish, then the lifespan's
        # shutdown flushes the request log before the process exits 0.
        timeout_graceful_shutdown=settings.drain_timeout_seconds,
        access_log=False,  # the request line is ours (logs.log_request)
        log_config=log_config(settings.log_format),
    )
    # Before anything slow, printed or written (a busy port leaves no trace); the lock
    # after the port, since it may have to make the data dir.
    try:
        sock = launch.listen(host, port, config.backlog)
        serve_lock.hold(settings)  # held until this process exits
    except (serve_lock.ServeLocked, launch.CannotListen) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    url_host = f"[{host}]" if ":" in host else host
    base_url = f"http://{url_host}:{sock.getsockname()[1]}/api/v1"
    first = _run(lambda session: _bootstrap(session, settings), create=True)
    data = _data_served(settings)
    _emit(
        as_json,
        {"base_url": base_url, **data, **first},
        _welcome(base_url, data, first, _self_command(settings.data_dir)),
    )
    sys.stdout.flush()
    # uvicorn drains on SIGTERM, then raises the signal again with the handler it found
    # installed: with this one, a node that drained exits 0 rather than "killed by SIGTERM".
    signal.signal(signal.SIGTERM, _exit_drained)
    # Before uvicorn spawns the workers: they inherit where to keep their metrics.
    share_between_workers(settings.data_dir, workers)
    raise typer.Exit(launch.run(config, sock))


def _exit_drained(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


async def _bootstrap(session: AsyncSession, settings: Settings) -> dict[str, str]:
    """Check that this node agrees with its cluster; on an empty database make the first
    organization and its key, so curl works at once. Nodes starting together take turns
    (the start-up lock), so exactly one of them makes it."""
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
    database = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
    return {"data_dir": str(settings.data_dir.resolve()), "database": database}


def _welcome(base_url: str, data: dict[str, str], first: dict[str, str], command: str) -> str:
    # Here, not at the top: the registry imports every engine, which no admin command needs.
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


# --- organizations and accounts ----------------------------------------------------------


@orgs_app.command("create")
def orgs_create(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    account: Annotated[str | None, typer.Option(help="Existing account id.")] = None,
    clone_limit: Annotated[int | None, typer.Option(min=0, help="Cloned voices allowed.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an organization (in a new account unless --account is given)."""
    org = _run(lambda s: tenancy.create_org(s, name, account, clone_limit))
    data = {"id": org.id, "name": org.name, "account_id": org.account_id}
    _emit(as_json, data, f"Created organization {org.id} ({org.name}) in {org.account_id}")


_TENANT_ID_ARGUMENTS = {
    "org": typer.Argument(..., metavar="ORG_ID"),
    "account": typer.Argument(..., metavar="ACCOUNT_ID"),
}
_SERVICE_ARGUMENT = typer.Argument(..., metavar="SERVICE")


def _status_commands(group: typer.Typer, kind: tenancy.TenantKind, label: str) -> None:
    # A default rather than Annotated: the argument depends on the group, and annotations
    # are strings here, resolved in the module's namespace.
    tenant_id = _TENANT_ID_ARGUMENTS[kind]

    def change(id_: str, status: str, as_json: bool) -> None:
        _run(lambda s: tenancy.set_status(s, kind, id_, status))
        _emit(as_json, {"id": id_, "status": status}, f"{label} {id_} is {status}")

    @group.command("suspend", help=f"Suspend an {label.lower()}: its keys get 403.")
    def suspend(id_: str = tenant_id, as_json: JsonFlag = False) -> None:
        change(id_, tenancy.SUSPENDED, as_json)

    @group.command("reinstate", help=f"Lift an {label.lower()}'s suspension.")
    def reinstate(id_: str = tenant_id, as_json: JsonFlag = False) -> None:
        change(id_, tenancy.ACTIVE, as_json)

    def switch(id_: str, service: Service, enabled: bool, as_json: bool) -> None:
        disabled = _run(lambda s: tenancy.set_service_enabled(s, kind, id_, service.value, enabled))
        state = "enabled" if enabled else "disabled"
        _emit(
            as_json,
            {"id": id_, "disabled_services": disabled},
            f"{service.value} {state} for {label.lower()} {id_}",
        )

    @group.command("disable", help=f"Disable a service for an {label.lower()} (403).")
    def disable(
        id_: str = tenant_id,
        service: Service = _SERVICE_ARGUMENT,
        as_json: JsonFlag = False,
    ) -> None:
        switch(id_, service, False, as_json)

    @group.command("enable", help=f"Enable a service again for an {label.lower()}.")
    def enable(
        id_: str = tenant_id,
        service: Service = _SERVICE_ARGUMENT,
        as_json: JsonFlag = False,
    ) -> None:
        switch(id_, service, True, as_json)


_status_commands(orgs_app, "org", "Organization")
_status_commands(accounts_app, "account", "Account")


@orgs_app.command("set-cap")
def orgs_set_cap(
    org_id: OrgId,
    monthly_units: MonthlyUnits = None,
    no_cap: Annotated[bool, typer.Option("--no-cap", help="Remove the cap.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Cap an organization's billed units per UTC calendar month (429 past it)."""
    if (monthly_units is None) == (not no_cap):
        typer.echo("error: give --monthly-units N or --no-cap.", err=True)
        raise typer.Exit(2)
    _run(lambda s: tenancy.set_org_cap(s, org_id, monthly_units))
    cap = "no cap" if monthly_units is None else f"a cap of {monthly_units} units a month"
    _emit(as_json, {"id": org_id, "monthly_units": monthly_units}, f"{org_id} has {cap}")


@orgs_app.command("list")
def orgs_list(
    account: Annotated[str | None, typer.Option(help="Only this account's.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List organizations, oldest first."""
    orgs = _run(lambda s: tenancy.list_orgs(s, account))
    rows = [
        {"id": o.id, "name": o.name, "account_id": o.account_id, "status": o.status} for o in orgs
    ]
    lines = [f"{r['id']}  {r['account_id']}  {r['status']:<9}  {r['name']}" for r in rows]
    _emit(as_json, rows, "\n".join(lines) or "no organizations")


@orgs_app.command("show")
def orgs_show(org_id: OrgId, as_json: JsonFlag = False) -> None:
    """One organization: its account, clone limit, unit cap, status and disabled services."""
    org, account = _run(lambda s: tenancy.org_with_account(s, org_id))
    default_limit = Settings().default_clone_limit
    data = {
        "id": org.id,
        "name": org.name,
        "account_id": org.account_id,
        "status": org.status,
        "account_status": account.status,
        "clone_limit": org.clone_limit,
        "effective_clone_limit": default_limit if org.clone_limit is None else org.clone_limit,
        "monthly_units": org.monthly_units,
        "disabled_services": org.disabled_services,
        "account_disabled_services": account.disabled_services,
        "created_at": org.created_at,
    }
    limit = org.clone_limit if org.clone_limit is not None else f"{default_limit} (default)"
    text = "\n".join(
        [
            f"{org.id}  {org.name}",
            f"account          {account.id} ({account.status})",
            f"status           {org.status}",
            f"clone limit      {limit}",
            f"monthly cap      {org.monthly_units if org.monthly_units is not None else 'none'}",
            f"disabled         {', '.join(org.disabled_services) or 'none'}"
            f" (account: {', '.join(account.disabled_services) or 'none'})",
        ]
    )
    _emit(as_json, data, text)


@accounts_app.command("list")
def accounts_list(as_json: JsonFlag = False) -> None:
    """List accounts, oldest first, with their number of organizations."""
    accounts = _run(tenancy.list_accounts)
    rows = [
        {"id": a.id, "status": a.status, "organizations": count, "created_at": a.created_at}
        for a, count in accounts
    ]
    lines = [f"{r['id']}  {r['status']:<9}  {r['organizations']} organization(s)" for r in rows]
    _emit(as_json, rows, "\n".join(lines) or "no accounts")


# --- console users and the audit log ------------------------------------------------------

PasswordStdin = Annotated[
    bool,
    typer.Option(
        "--password-stdin",
        help="Read the password from standard input (at least 12 characters) instead of "
        "generating one.",
    ),
]


def _read_password(from_stdin: bool) -> str | None:
    if not from_stdin:
        return None
    password = sys.stdin.readline().rstrip("\r\n")
    try:
        users.check_password(password)
    except users.WeakPassword as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    return password


def _emit_user(as_json: bool, new: users.NewUser, verb: str) -> None:
    user = new.user
    data: dict[str, Any] = {"id": user.id, "email": user.email, "account_id": user.account_id}
    text = f"{verb} user {user.id} ({user.email}) in {user.account_id}"
    if new.generated_password is not None:
        data["password"] = new.generated_password
        text += f"\nPassword (shown only now): {new.generated_password}"
    _emit(as_json, data, text)


@users_app.command("create")
def users_create(
    account_id: AccountId,
    email: Annotated[str, typer.Argument(metavar="EMAIL")],
    password_stdin: PasswordStdin = False,
    as_json: JsonFlag = False,
) -> None:
    """Create a console user for an account; a generated password is printed once."""
    password = _read_password(password_stdin)
    new = _run(lambda s: users.create_user(s, account_id, email, password))
    _emit_user(as_json, new, "Created")


@users_app.command("list")
def users_list(account_id: AccountId, as_json: JsonFlag = False) -> None:
    """List an account's console users."""
    found = _run(lambda s: users.list_users(s, account_id))
    rows = [
        {
            "id": u.id,
            "email": u.email,
            "status": u.status,
            "created_at": u.created_at,
            "last_sign_in_at": u.last_sign_in_at,
        }
        for u in found
    ]
    lines = [f"{r['id']}  {r['status']:<8}  {r['email']}" for r in rows]
    _emit(as_json, rows, "\n".join(lines) or "no users")


@users_app.command("disable")
def users_disable(user_id: UserId, as_json: JsonFlag = False) -> None:
    """Disable a user: they cannot sign in, and their open sessions end now."""
    user = _run(lambda s: users.disable_user(s, user_id))
    _emit(as_json, {"id": user.id, "status": user.status}, f"User {user.id} is disabled")


@users_app.command("reset-password")
def users_reset_password(
    user_id: UserId, password_stdin: PasswordStdin = False, as_json: JsonFlag = False
) -> None:
    """Set a new password (generated unless given on stdin); open sessions end."""
    password = _read_password(password_stdin)
    new = _run(lambda s: users.reset_password(s, user_id, password))
    _emit_user(as_json, new, "Reset the password of")


@app.command()
def audit(
    account_id: AccountId,
    limit: Annotated[int, typer.Option(min=1, help="Most recent N events.")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """An account's audit log, newest first: console sign-ins and every change made there."""

    async def load(session: AsyncSession) -> list[dict[str, Any]]:
        await tenancy.require_account(session, account_id)
        return [
            {
                "created_at": e.created_at,
                "action": e.action,
                "user_id": e.user_id,
                "email": e.email,
                "target": e.target,
                "ip": e.ip,
            }
            for e in await list_events(session, account_id, limit)
        ]

    rows = _run(load)
    lines = [
        f"{r['created_at']:%Y-%m-%d %H:%M:%S}  {r['action']:<18}  {r['email'] or '-'}  "
        f"{r['target'] or ''}  {r['ip'] or ''}"
        for r in rows
    ]
    _emit(as_json, rows, "\n".join(lines) or "no events")


# --- keys ---------------------------------------------------------------------------------


@keys_app.command("create")
def keys_create(
    org_id: OrgId,
    name: Annotated[str | None, typer.Option(help="A label for the key.")] = None,
    rate_limit: Annotated[
        int | None,
        typer.Option(parser=parse_rate_limit, help="Requests per minute (default from settings)."),
    ] = None,
    scopes: Annotated[
        str | None,
        typer.Option(
            metavar="SCOPE,...",
            help=f"What the key may do, of: {', '.join(Scope)} (default: everything).",
        ),
    ] = None,
    monthly_units: MonthlyUnits = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an API key; its secret is printed now and never again."""
    try:
        chosen = None if scopes is None else tenancy.parse_scopes(scopes)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--scopes") from None

    async def work(session: AsyncSession) -> tenancy.CreatedKey:
        # A key hashed under another pepper than the nodes' would never authenticate.
        pepper = load_pepper(Settings())
        await cluster.check_pepper(session, pepper)
        return await tenancy.create_key(
            session,
            SecretHasher(pepper),
            org_id,
            name,
            rate_limit,
            scopes=chosen,
            monthly_units=monthly_units,
        )

    created = _run(work)
    key = created.key
    data = {
        "id": key.id,
        "secret": created.secret,
        "prefix": key.prefix,
        "org_id": key.org_id,
        "scopes": key.scopes,
        "monthly_units": key.monthly_units,
    }
    _emit(as_json, data, f"Key {key.id} for {key.org_id} (shown only now):\n{created.secret}")


@keys_app.command("revoke")
def keys_revoke(key_id: KeyId, as_json: JsonFlag = False) -> None:
    """Revoke a key: it gets 401 from now on."""
    key = _run(lambda s: tenancy.revoke_key(s, key_id))
    data = {"id": key.id, "revoked_at": key.revoked_at}
    _emit(as_json, data, f"Key {key.id} revoked")


@keys_app.command("list")
def keys_list(org_id: OrgId, as_json: JsonFlag = False) -> None:
    """List an organization's keys (prefixes only; secrets are never stored)."""
    keys = _run(lambda s: tenancy.list_keys(s, org_id))
    default_limit = Settings().default_rate_limit
    rows = [
        {
            "id": k.id,
            "org_id": k.org_id,
            "prefix": k.prefix,
            "name": k.name,
            "kind": k.kind,
            "rate_limit": k.rate_limit,
            "effective_rate_limit": default_limit if k.rate_limit is None else k.rate_limit,
            "scopes": k.scopes,
            "monthly_units": k.monthly_units,
            "created_at": k.created_at,
            "revoked_at": k.revoked_at,
            "last_used_at": k.last_used_at,
        }
        for k in keys
    ]
    lines = [
        f"{k.id}  {k.prefix}...  {'revoked' if k.revoked_at else 'active':<7}  "
        f"{_per_minute(k.rate_limit, default_limit):<20}  "
        f"{'all scopes' if k.scopes is None else ','.join(k.scopes)}  "
        f"{'no cap' if k.monthly_units is None else f'{k.monthly_units} units/month'}  "
        f"{_key_label(k.name, k.kind)}"
        for k in keys
    ]
    _emit(as_json, rows, "\n".join(lines) or "no keys")


def _per_minute(rate_limit: int | None, default: int) -> str:
    return f"{default}/min (default)" if rate_limit is None else f"{rate_limit}/min"


def _key_label(name: str | None, kind: str) -> str:
    label = name or "(no name)"
    return label if kind == "api" else f"{label} [{kind} key]"


# --- usage and request log ----------------------------------------------------------------


@app.command()
def usage(
    org_id: OrgId,
    start: Annotated[
        str | None,
        typer.Option(
            "--from", metavar="YYYY-MM-DD", help="First UTC day (default: 29 days before --to)."
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option("--to", metavar="YYYY-MM-DD", help="Last UTC day (default: today)."),
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Billed units per UTC day and endpoint, and their totals, as GET /api/v1/usage
    answers (default: the 30 days ending --to; at most 366 days)."""
    try:
        first, last = usage_period(parse_day(start), parse_day(end))
    except InvalidPeriod as exc:
        _refuse(f"--from, --to: {exc}")

    async def load(session: AsyncSession) -> list[DailyUsage]:
        await tenancy.require_org(session, org_id)
        return await daily_usage(session, org_id, first, last)

    rows = _run(load)
    data = {
        "org_id": org_id,
        "from": first,
        "to": last,
        "usage": [
            {"date": r.day, "endpoint": r.endpoint, "units": r.units, "requests": r.requests}
            for r in rows
        ],
        "totals": totals(rows),
    }
    _emit(as_json, data, _usage_text(org_id, first, last, rows))


def _usage_text(org_id: str, first: date, last: date, rows: list[DailyUsage]) -> str:
    period = f"{org_id}, {first} to {last} (UTC days)"
    if not rows:
        return f"No usage for {period}."
    width = max(len(r.endpoint) for r in rows)
    lines = [f"Usage of {period}:"]
    lines += [
        f"{r.day}  {r.endpoint:<{width}}  {r.units:>10} units  {r.requests:>7} requests"
        for r in rows
    ]
    lines.append("Totals:")
    requests = Counter[str]()
    for r in rows:
        requests[r.endpoint] += r.requests
    lines += [
        f"{'':10}  {endpoint:<{width}}  {units:>10} units  {requests[endpoint]:>7} requests"
        for endpoint, units in totals(rows).items()
    ]
    return "\n".join(lines)


@app.command()
def requests(
    org_id: OrgId,
    limit: Annotated[int, typer.Option(min=1, help="Most recent N requests.")] = 50,
    as_json: JsonFlag = False,
) -> None:
    """An organization's most recent requests, newest first."""

    async def load(session: AsyncSession) -> list[dict[str, Any]]:
        await tenancy.require_org(session, org_id)
        return [
            {
                "request_id": r.entry.request_id,
                "method": r.entry.method,
                "path": r.entry.path,
                "status": r.entry.status,
                "error_code": r.entry.error_code,
                "duration_ms": r.entry.duration_ms,
                "created_at": r.entry.created_at,
                "units": r.units,
                "billed_endpoint": r.endpoint,
            }
            for r in await recent_requests(session, org_id, limit)
        ]

    rows = _run(load)
    lines = [
        f"{r['created_at']:%Y-%m-%d %H:%M:%S}  {r['request_id']}  {r['method']} {r['path']}  "
        f"{r['status']} {r['error_code'] or ''} {r['duration_ms']}ms  {r['units']} units"
        for r in rows
    ]
    _emit(as_json, rows, "\n".join(lines) or "no requests")


def main() -> None:
    app()
