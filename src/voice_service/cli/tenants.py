"""Tenants, as the operator administers them: organizations, accounts, console users,
API keys, and the console's audit log."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from voice_service.cli.shared import (
    PLAIN_HELP,
    AccountId,
    JsonFlag,
    KeyId,
    MonthlyUnits,
    OrgId,
    UserId,
    emit,
    run_work,
    shown,
)

# What the options need to be declared, and nothing more: the tenancy services (SQLAlchemy,
# argon2) are imported by the commands that use them (cli/shared.py says why).
from voice_service.core.vocabulary import Scope, Service
from voice_service.tenancy.rate_limits import parse_rate_limit

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from voice_service.tenancy.service import CreatedKey, TenantKind
    from voice_service.tenancy.users import NewUser

orgs_app = typer.Typer(
    help="Organizations: create, list, show, suspend, switch services.", **PLAIN_HELP
)
accounts_app = typer.Typer(help="Accounts (customers owning organizations).", **PLAIN_HELP)
keys_app = typer.Typer(help="API keys: create (secret shown once), revoke, list.", **PLAIN_HELP)
users_app = typer.Typer(
    help="Console users: people of an account who sign in at /console/ with email and password.",
    **PLAIN_HELP,
)

# --- organizations and accounts ----------------------------------------------------------


@orgs_app.command("create")
def orgs_create(
    name: Annotated[str, typer.Argument(metavar="NAME")],
    account: Annotated[str | None, typer.Option(help="Existing account id.")] = None,
    clone_limit: Annotated[int | None, typer.Option(min=0, help="Cloned voices allowed.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an organization (in a new account unless --account is given)."""
    from voice_service.tenancy import service as tenancy

    org = run_work(lambda s: tenancy.create_org(s, name, account, clone_limit))
    data = {"id": org.id, "name": org.name, "account_id": org.account_id}
    emit(as_json, data, f"Created organization {org.id} ({org.name}) in {org.account_id}")


_TENANT_ID_ARGUMENTS = {
    "org": typer.Argument(..., metavar="ORG_ID"),
    "account": typer.Argument(..., metavar="ACCOUNT_ID"),
}
_SERVICE_ARGUMENT = typer.Argument(..., metavar="SERVICE")


def _status_commands(group: typer.Typer, kind: TenantKind, label: str) -> None:
    # A default rather than Annotated: the argument depends on the group, and annotations
    # are strings here, resolved in the module's namespace.
    tenant_id = _TENANT_ID_ARGUMENTS[kind]

    def change(id_: str, suspended: bool, as_json: bool) -> None:
        from voice_service.tenancy import service as tenancy

        status = tenancy.SUSPENDED if suspended else tenancy.ACTIVE
        run_work(lambda s: tenancy.set_status(s, kind, id_, status))
        emit(as_json, {"id": id_, "status": status}, f"{label} {id_} is {status}")

    @group.command("suspend", help=f"Suspend an {label.lower()}: its keys get 403.")
    def suspend(id_: str = tenant_id, as_json: JsonFlag = False) -> None:
        change(id_, suspended=True, as_json=as_json)

    @group.command("reinstate", help=f"Lift an {label.lower()}'s suspension.")
    def reinstate(id_: str = tenant_id, as_json: JsonFlag = False) -> None:
        change(id_, suspended=False, as_json=as_json)

    def switch(id_: str, service: Service, enabled: bool, as_json: bool) -> None:
        from voice_service.tenancy import service as tenancy

        disabled = run_work(
            lambda s: tenancy.set_service_enabled(s, kind, id_, service.value, enabled)
        )
        state = "enabled" if enabled else "disabled"
        emit(
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
    from voice_service.tenancy import service as tenancy

    run_work(lambda s: tenancy.set_org_cap(s, org_id, monthly_units))
    cap = "no cap" if monthly_units is None else f"a cap of {monthly_units} units a month"
    emit(as_json, {"id": org_id, "monthly_units": monthly_units}, f"{org_id} has {cap}")


@orgs_app.command("list")
def orgs_list(
    account: Annotated[str | None, typer.Option(help="Only this account's.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List organizations, oldest first."""
    from voice_service.tenancy import service as tenancy

    orgs = run_work(lambda s: tenancy.list_orgs(s, account))
    rows = [
        {"id": o.id, "name": o.name, "account_id": o.account_id, "status": o.status} for o in orgs
    ]
    lines = [f"{r['id']}  {r['account_id']}  {r['status']:<9}  {r['name']}" for r in rows]
    emit(as_json, rows, "\n".join(lines) or "no organizations")


@orgs_app.command("show")
def orgs_show(org_id: OrgId, as_json: JsonFlag = False) -> None:
    """One organization: its account, clone limit, unit cap, status and disabled services."""
    from voice_service.settings import Settings
    from voice_service.tenancy import service as tenancy

    org, account = run_work(lambda s: tenancy.org_with_account(s, org_id))
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
    emit(as_json, data, text)


@accounts_app.command("list")
def accounts_list(as_json: JsonFlag = False) -> None:
    """List accounts, oldest first, with their number of organizations."""
    from voice_service.tenancy import service as tenancy

    accounts = run_work(tenancy.list_accounts)
    rows = [
        {"id": a.id, "status": a.status, "organizations": count, "created_at": a.created_at}
        for a, count in accounts
    ]
    lines = [f"{r['id']}  {r['status']:<9}  {r['organizations']} organization(s)" for r in rows]
    emit(as_json, rows, "\n".join(lines) or "no accounts")


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
    from voice_service.tenancy import users

    password = sys.stdin.readline().rstrip("\r\n")
    try:
        users.check_password(password)
    except users.WeakPassword as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    return password


def _emit_user(as_json: bool, new: NewUser, verb: str) -> None:
    user = new.user
    data: dict[str, Any] = {"id": user.id, "email": user.email, "account_id": user.account_id}
    text = f"{verb} user {user.id} ({user.email}) in {user.account_id}"
    if new.generated_password is not None:
        data["password"] = new.generated_password
        text += f"\nPassword (shown only now): {new.generated_password}"
    emit(as_json, data, text)


@users_app.command("create")
def users_create(
    account_id: AccountId,
    email: Annotated[str, typer.Argument(metavar="EMAIL")],
    password_stdin: PasswordStdin = False,
    as_json: JsonFlag = False,
) -> None:
    """Create a console user for an account; a generated password is printed once."""
    from voice_service.tenancy import users

    password = _read_password(password_stdin)
    new = run_work(lambda s: users.create_user(s, account_id, email, password))
    _emit_user(as_json, new, "Created")


@users_app.command("list")
def users_list(account_id: AccountId, as_json: JsonFlag = False) -> None:
    """List an account's console users."""
    from voice_service.tenancy import users

    found = run_work(lambda s: users.list_users(s, account_id))
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
    emit(as_json, rows, "\n".join(lines) or "no users")


@users_app.command("disable")
def users_disable(user_id: UserId, as_json: JsonFlag = False) -> None:
    """Disable a user: they cannot sign in, and their open sessions end now."""
    from voice_service.tenancy import users

    user = run_work(lambda s: users.disable_user(s, user_id))
    emit(as_json, {"id": user.id, "status": user.status}, f"User {user.id} is disabled")


@users_app.command("reset-password")
def users_reset_password(
    user_id: UserId, password_stdin: PasswordStdin = False, as_json: JsonFlag = False
) -> None:
    """Set a new password (generated unless given on stdin); open sessions end."""
    from voice_service.tenancy import users

    password = _read_password(password_stdin)
    new = run_work(lambda s: users.reset_password(s, user_id, password))
    _emit_user(as_json, new, "Reset the password of")


def audit(
    account_id: AccountId,
    limit: Annotated[int, typer.Option(min=1, help="Most recent N events.")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """An account's audit log, newest first: console sign-ins and every change made there."""
    from voice_service.tenancy import service as tenancy
    from voice_service.tenancy.audit import list_events

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

    rows = run_work(load)
    lines = [
        f"{r['created_at']:%Y-%m-%d %H:%M:%S}  {r['action']:<18}  {r['email'] or '-'}  "
        f"{r['target'] or ''}  {r['ip'] or ''}"
        for r in rows
    ]
    emit(as_json, rows, "\n".join(lines) or "no events")


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
    from voice_service.kit import cluster
    from voice_service.settings import Settings
    from voice_service.tenancy import service as tenancy
    from voice_service.tenancy.keys import SecretHasher, load_pepper

    try:
        chosen = None if scopes is None else tenancy.parse_scopes(scopes)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--scopes") from None

    async def work(session: AsyncSession) -> CreatedKey:
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

    created = run_work(work)
    key = created.key
    data = {
        "id": key.id,
        "secret": created.secret,
        "prefix": key.prefix,
        "org_id": key.org_id,
        "scopes": key.scopes,
        "monthly_units": key.monthly_units,
    }
    emit(as_json, data, f"Key {key.id} for {key.org_id} (shown only now):\n{created.secret}")


@keys_app.command("revoke")
def keys_revoke(key_id: KeyId, as_json: JsonFlag = False) -> None:
    """Revoke a key: it gets 401 from now on."""
    from voice_service.tenancy import service as tenancy

    key = run_work(lambda s: tenancy.revoke_key(s, key_id))
    data = {"id": key.id, "revoked_at": key.revoked_at}
    emit(as_json, data, f"Key {key.id} revoked")


@keys_app.command("list")
def keys_list(org_id: OrgId, as_json: JsonFlag = False) -> None:
    """List an organization's keys (prefixes only; secrets are never stored)."""
    from voice_service.settings import Settings
    from voice_service.tenancy import service as tenancy

    keys = run_work(lambda s: tenancy.list_keys(s, org_id))
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
    emit(as_json, rows, "\n".join(lines) or "no keys")


def _per_minute(rate_limit: int | None, default: int) -> str:
    return f"{default}/min (default)" if rate_limit is None else f"{rate_limit}/min"


def _key_label(name: str | None, kind: str) -> str:
    label = shown(name) if name else "(no name)"
    return label if kind == "api" else f"{label} [{kind} key]"
