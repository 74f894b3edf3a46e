"""voice-service: run the API and administer tenants. Every command accepts --json.

Configuration comes from VOICE_SERVICE_* environment variables (DATA_DIR, DATABASE_URL,
REDIS_URL, KEY_PEPPER, POOL_SIZE, ...; the README lists them all)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from enum import StrEnum
from types import FrameType
from typing import Annotated, Any, TypeVar

import typer
import uvicorn
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service import cluster
from voice_service.auth.keys import SecretHasher, load_pepper
from voice_service.console.audit import list_events
from voice_service.db import hold_startup_lock, run_in_transaction
from voice_service.engines.registry import CLONE_BASE_VOICE
from voice_service.ids import catalogue_voice_id
from voice_service.logs import log_config
from voice_service.metrics.multiprocess import share_between_workers
from voice_service.requestlog.repository import recent_requests
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy
from voice_service.tenancy import users
from voice_service.tenancy.rate_limits import parse_rate_limit
from voice_service.usage.repository import usage_for_org

T = TypeVar("T")
# The English neural voice every install has (catalogue ids derive from engine keys).
DEFAULT_VOICE_ID = catalogue_voice_id(CLONE_BASE_VOICE)

app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False)
orgs_app = typer.Typer(
    help="Organizations: create, list, show, suspend, switch services.", no_args_is_help=True
)
accounts_app = typer.Typer(help="Accounts (customers owning organizations).", no_args_is_help=True)
keys_app = typer.Typer(
    help="API keys: create (secret shown once), revoke, list.", no_args_is_help=True
)
users_app = typer.Typer(
    help="Console users: people of an account who sign in at /console/ with email and password.",
    no_args_is_help=True,
)
app.add_typer(orgs_app, name="orgs")
app.add_typer(accounts_app, name="accounts")
app.add_typer(keys_app, name="keys")
app.add_typer(users_app, name="users")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print only JSON on stdout.")]
# Positional arguments, named alike in every command's help.
OrgId = Annotated[str, typer.Argument(metavar="ORG_ID")]
AccountId = Annotated[str, typer.Argument(metavar="ACCOUNT_ID")]
KeyId = Annotated[str, typer.Argument(metavar="KEY_ID")]
UserId = Annotated[str, typer.Argument(metavar="USER_ID")]


class Service(StrEnum):
    text_to_speech = "text-to-speech"
    speech_to_text = "speech-to-text"
    asr = "asr"
    cloning = "cloning"


def _run(work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """Run one unit of work against the configured database, migrated first."""

    settings = Settings()
    try:
        return asyncio.run(run_in_transaction(settings, work))
    except tenancy.UnknownId as exc:
        # A CLI run from another directory reads another (new, empty) data dir: say which.
        typer.echo(f"error: {str(exc).rstrip('.')} in {_database(settings)}.", err=True)
        raise typer.Exit(1) from None
    except (cluster.ClusterMismatch, ValueError) as exc:
        typer.echo(f"error: {exc.args[0] if exc.args else exc}", err=True)
        raise typer.Exit(1) from None


def _database(settings: Settings) -> str:
    if settings.is_sqlite:
        return (
            f"the SQLite database {settings.data_dir.resolve() / 'voice-service.db'} "
            "(set VOICE_SERVICE_DATA_DIR or VOICE_SERVICE_DATABASE_URL to use another)"
        )
    url = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
    return f"the database {url}"


def _emit(as_json: bool, data: Any, text: str) -> None:
    typer.echo(json.dumps(data, default=_json_default, indent=2) if as_json else text)


def _json_default(value: object) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(type(value).__name__)


# --- serve -------------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
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
    base_url = f"http://{host}:{port}/api/v1"
    first = _run(lambda session: _bootstrap(session, settings))
    _emit(as_json, {"base_url": base_url, **first}, _welcome(base_url, first))
    sys.stdout.flush()
    # uvicorn drains on SIGTERM, then raises the signal again with the handler it found
    # installed: with this one, a node that drained exits 0 rather than "killed by SIGTERM".
    signal.signal(signal.SIGTERM, _exit_drained)
    # Before uvicorn spawns the workers: they inherit where to keep their metrics.
    share_between_workers(settings.data_dir, workers)
    uvicorn.run(
        "voice_service.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        # Our protocol answers malformed HTTP with the envelope, times out slow headers and
        # caps connections; it takes its settings and log writer from the lifespan.
        http="voice_service.server:HttpProtocol",
        lifespan="on",
        # SIGTERM: stop accepting, let requests in flight finish, then the lifespan's
        # shutdown flushes the request log before the process exits 0.
        timeout_graceful_shutdown=settings.drain_timeout_seconds,
        access_log=False,  # the request line is ours (logs.log_request)
        log_config=log_config(settings.log_format),
    )


def _exit_drained(_signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(0)


async def _bootstrap(session: AsyncSession, settings: Settings) -> dict[str, str]:
    """Check that this node agrees with its cluster; on an empty database make the first
    organization and its key, so curl works at once. Nodes starting together take turns
    (the start-up lock), so exactly one of them makes it."""
    await hold_startup_lock(session)
    pepper = load_pepper(settings)
    await cluster.check_pepper(session, pepper)
    await cluster.check_connection_budget(session, settings)
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


def _welcome(base_url: str, first: dict[str, str]) -> str:
    console = base_url.removesuffix("/api/v1") + "/console/"
    if "api_key" not in first:
        org_id = first.get("org_id", "ORG_ID")
        account_id = first.get("account_id", "ACCOUNT_ID")
        return (
            f"Voice Service on {base_url} (console: {console})\n"
            f"The first organization is {org_id} in account {account_id} "
            "(its key was shown when it was made).\n"
            f"Make a key with: voice-service keys create {org_id}  "
            "(voice-service orgs create NAME makes an organization)\n"
            f"Make a console user with: voice-service users create {account_id} EMAIL"
        )
    return f"""Voice Service on {base_url} (console: {console})
Created organization {first["org_id"]} in account {first["account_id"]}
and its first API key (shown only now):

    {first["api_key"]}

Sign in to the console: voice-service users create {first["account_id"]} you@example.com

Try it:
    export VOICE_API_KEY={first["api_key"]}
    curl -s {base_url}/voices -H "Authorization: Bearer $VOICE_API_KEY"
    curl -s {base_url}/text-to-speech -H "Authorization: Bearer $VOICE_API_KEY" \\
      -H 'Content-Type: application/json' -o hello.mp3 \\
      -d '{{"text": "Hello from Voice Service.", "voice_id": "{DEFAULT_VOICE_ID}"}}'
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
    """One organization: its account, clone limit, status and disabled services."""
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
    as_json: JsonFlag = False,
) -> None:
    """Create an API key; its secret is printed now and never again."""

    async def work(session: AsyncSession) -> tenancy.CreatedKey:
        # A key hashed under another pepper than the nodes' would never authenticate.
        pepper = load_pepper(Settings())
        await cluster.check_pepper(session, pepper)
        return await tenancy.create_key(session, SecretHasher(pepper), org_id, name, rate_limit)

    created = _run(work)
    key = created.key
    data = {"id": key.id, "secret": created.secret, "prefix": key.prefix, "org_id": key.org_id}
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
    rows = [
        {
            "id": k.id,
            "prefix": k.prefix,
            "name": k.name,
            "rate_limit": k.rate_limit,
            "created_at": k.created_at,
            "revoked_at": k.revoked_at,
            "last_used_at": k.last_used_at,
        }
        for k in keys
    ]
    lines = [
        f"{r['id']}  {r['prefix']}...  {'revoked' if r['revoked_at'] else 'active'}" for r in rows
    ]
    _emit(as_json, rows, "\n".join(lines) or "no keys")


# --- usage and request log ----------------------------------------------------------------


@app.command()
def usage(org_id: OrgId, as_json: JsonFlag = False) -> None:
    """An organization's billed usage records."""

    async def load(session: AsyncSession) -> list[dict[str, Any]]:
        await tenancy.require_org(session, org_id)
        return [
            {
                "request_id": u.request_id,
                "endpoint": u.endpoint,
                "units": u.units,
                "created_at": u.created_at,
            }
            for u in await usage_for_org(session, org_id)
        ]

    rows = _run(load)
    lines = [
        f"{r['created_at']:%Y-%m-%d %H:%M:%S}  {r['request_id']}  {r['endpoint']}  {r['units']}"
        for r in rows
    ]
    _emit(as_json, rows, "\n".join(lines) or "no usage")


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
                "request_id": r.request_id,
                "method": r.method,
                "path": r.path,
                "status": r.status,
                "error_code": r.error_code,
                "duration_ms": r.duration_ms,
                "created_at": r.created_at,
            }
            for r in await recent_requests(session, org_id, limit)
        ]

    rows = _run(load)
    lines = [
        f"{r['created_at']:%Y-%m-%d %H:%M:%S}  {r['request_id']}  {r['method']} {r['path']}  "
        f"{r['status']} {r['error_code'] or ''} {r['duration_ms']}ms"
        for r in rows
    ]
    _emit(as_json, rows, "\n".join(lines) or "no requests")


def main() -> None:
    app()
