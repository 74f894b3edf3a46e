"""Signing in and out, and the list of the account's organizations."""

from __future__ import annotations

import logging
import math
from datetime import timedelta

from fastapi import APIRouter, Request, Response
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.console import throttle
from voice_service.console.audit import Action, record_event, record_user_action
from voice_service.console.auth import (
    MAX_FORM_FIELD_BYTES,
    MAX_FORM_FIELDS,
    SignedInUser,
    checked_form,
)
from voice_service.console.pages import CONSOLE_PREFIX, redirect, render
from voice_service.console.repository import account_orgs
from voice_service.console.security import (
    PRE_SESSION_COOKIE,
    SESSION_COOKIE,
    check_csrf,
    clear_cookie,
    client_ip,
    new_csrf_token,
    set_cookie,
)
from voice_service.console.sessions import end_session, find_session, start_session
from voice_service.db import transaction
from voice_service.deps import Context
from voice_service.models import Account, User, utcnow
from voice_service.tenancy.service import SUSPENDED
from voice_service.tenancy.users import DISABLED, find_by_email, normalize_email, password_matches

logger = logging.getLogger(__name__)
router = APIRouter()

WRONG_CREDENTIALS = "Incorrect email or password."
PRE_SESSION_SECONDS = 3600


@router.get("/")
async def home(request: Request, context: Context) -> Response:
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        async with context.sessions() as session:
            if await find_session(session, token) is not None:
                return redirect(f"{CONSOLE_PREFIX}/orgs")
    return redirect(f"{CONSOLE_PREFIX}/sign-in")


@router.get("/sign-in")
async def sign_in_page(request: Request) -> Response:
    return _sign_in_form(request)


def _sign_in_form(
    request: Request, *, status: int = 200, error: str | None = None, email: str = ""
) -> Response:
    token = request.cookies.get(PRE_SESSION_COOKIE) or new_csrf_token()
    response = render(
        request, "sign_in.html", status=status, csrf_token=token, error=error, email=email
    )
    set_cookie(request, response, PRE_SESSION_COOKIE, token, PRE_SESSION_SECONDS)
    return response


@router.post("/sign-in")
async def sign_in(request: Request, context: Context) -> Response:
    form = await request.form(max_fields=MAX_FORM_FIELDS, max_part_size=MAX_FORM_FIELD_BYTES)
    check_csrf(request, request.cookies.get(PRE_SESSION_COOKIE), form.get("csrf_token"))
    email = normalize_email(str(form.get("email", "")))[:320]
    password = str(form.get("password", ""))
    ip = client_ip(request)
    async with transaction(context.sessions) as session:
        wait_until = await throttle.retry_at(session, email)
        if wait_until is not None:
            user = await find_by_email(session, email)
            _audit(session, Action.SIGN_IN_THROTTLED, user, email, ip)
    if wait_until is not None:
        seconds = math.ceil((wait_until - utcnow()).total_seconds())
        logger.warning("sign-in for %s refused: throttled for %d s more", email, seconds)
        return _sign_in_form(
            request,
            status=429,
            email=email,
            error=f"Too many failed sign-ins for this email. Try again in {seconds} seconds.",
        )
    return await _check_credentials(request, context, email, password, ip)


async def _check_credentials(
    request: Request, context: Context, email: str, password: str, ip: str | None
) -> Response:
    async with context.sessions() as session:
        user = await find_by_email(session, email)
        account = await session.get(Account, user.account_id) if user else None
    # The hash is checked even for an unknown email: the answer takes as long either way.
    matches = password_matches(user.password_hash if user else None, password)
    if user is None or not matches:
        async with transaction(context.sessions) as session:
            failures = await throttle.record_failure(session, email)
            _audit(session, Action.SIGN_IN_FAILED, user, email, ip)
        if failures >= throttle.FREE_FAILURES:
            logger.warning("sign-in for %s failed %d times in a row", email, failures)
        return _sign_in_form(request, status=401, email=email, error=WRONG_CREDENTIALS)
    refusal = _refusal(user, account)
    if refusal is not None:
        async with transaction(context.sessions) as session:
            _audit(session, Action.SIGN_IN_FAILED, user, email, ip, target=refusal)
        return _sign_in_form(request, status=403, email=email, error=refusal)
    lifetime = timedelta(hours=context.settings.console_session_hours)
    async with transaction(context.sessions) as session:
        await throttle.clear(session, email)
        token = await start_session(session, user, lifetime)
        _audit(session, Action.SIGN_IN, user, email, ip)
    response = redirect(f"{CONSOLE_PREFIX}/orgs")
    set_cookie(request, response, SESSION_COOKIE, token, int(lifetime.total_seconds()))
    clear_cookie(request, response, PRE_SESSION_COOKIE)
    return response


def _audit(
    session: AsyncSession,
    action: Action,
    user: User | None,
    email: str,
    ip: str | None,
    target: str | None = None,
) -> None:
    record_event(
        session,
        action,
        account_id=user.account_id if user else None,
        user_id=user.id if user else None,
        email=email,
        target=target,
        ip=ip,
    )


def _refusal(user: User, account: Account | None) -> str | None:
    """Why a user with the right password may still not sign in."""
    if user.status == DISABLED:
        return "This user is disabled. Contact your operator."
    if account is None or account.status == SUSPENDED:
        return "This account is suspended. Contact your operator."
    return None


@router.post("/sign-out")
async def sign_out(request: Request, context: Context, user: SignedInUser) -> Response:
    await checked_form(request, user)
    token = request.cookies.get(SESSION_COOKIE, "")
    async with transaction(context.sessions) as session:
        await end_session(session, token)
        record_user_action(session, user, Action.SIGN_OUT, user.email, client_ip(request))
    response = redirect(f"{CONSOLE_PREFIX}/sign-in")
    clear_cookie(request, response, SESSION_COOKIE)
    return response


@router.get("/orgs")
async def orgs_page(request: Request, context: Context, user: SignedInUser) -> Response:
    async with context.sessions() as session:
        orgs = await account_orgs(session, user.account_id)
    return render(request, "orgs.html", user=user, orgs=orgs)
