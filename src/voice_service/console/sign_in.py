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
    PRE_SESSION_SECONDS,
    SESSION_COOKIE,
    check_pre_session_csrf,
    clear_cookie,
    client_ip,
    new_pre_session_token,
    set_cookie,
)
from voice_service.core.errors import RateLimited
from voice_service.core.models import Account, User, utcnow
from voice_service.kit.db import transaction
from voice_service.tenancy.console_sessions import end_session, find_session, start_session
from voice_service.tenancy.password_checks import ChecksBusy
from voice_service.tenancy.service import SUSPENDED
from voice_service.tenancy.users import (
    DISABLED,
    MAX_EMAIL_LENGTH,
    InvalidEmail,
    find_by_email,
    normalize_email,
)
from voice_service.web.context import AppContext
from voice_service.web.deps import Context

logger = logging.getLogger(__name__)
router = APIRouter()

WRONG_CREDENTIALS = "Incorrect email or password."
# Attempts a minute from one client address, whatever emails they name: the per-account
# throttle alone lets one address try one password on each of many accounts.
SIGN_INS_PER_ADDRESS = 20


@router.get("/")
async def home(request: Request, context: Context) -> Response:
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        async with context.sessions() as session:
            if await find_session(session, token) is not None:
                return redirect(f"{CONSOLE_PREFIX}/orgs")
    return redirect(f"{CONSOLE_PREFIX}/sign-in")


@router.get("/sign-in")
async def sign_in_page(request: Request, context: Context) -> Response:
    return _sign_in_form(request, context)


def _sign_in_form(
    request: Request,
    context: AppContext,
    *,
    status: int = 200,
    error: str | None = None,
    email: str = "",
    retry_after: int | None = None,
) -> Response:
    token = request.cookies.get(PRE_SESSION_COOKIE)
    if token is None or status == 200:
        token = new_pre_session_token(context.hasher)
    response = render(
        request, "sign_in.html", status=status, csrf_token=token, error=error, email=email
    )
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    set_cookie(request, response, PRE_SESSION_COOKIE, token, PRE_SESSION_SECONDS)
    return response


@router.post("/sign-in")
async def sign_in(request: Request, context: Context) -> Response:
    form = await request.form(max_fields=MAX_FORM_FIELDS, max_part_size=MAX_FORM_FIELD_BYTES)
    cookie = request.cookies.get(PRE_SESSION_COOKIE)
    check_pre_session_csrf(request, context.hasher, cookie, form.get("csrf_token"))
    typed = str(form.get("email", ""))
    password = str(form.get("password", ""))
    ip = client_ip(request)
    try:
        await context.limiter.hit(f"console-sign-in:{ip}", SIGN_INS_PER_ADDRESS)
    except RateLimited as limited:
        seconds = int(limited.headers["Retry-After"])
        logger.warning(
            "sign-in refused: more than %d attempts a minute from %s", SIGN_INS_PER_ADDRESS, ip
        )
        return _sign_in_form(
            request,
            context,
            status=429,
            email=typed[:MAX_EMAIL_LENGTH],
            error=f"Too many sign-ins from your address. Try again in {seconds} seconds.",
            retry_after=seconds,
        )
    try:
        email = normalize_email(typed)
    except InvalidEmail:
        return _sign_in_form(
            request,
            context,
            status=400,
            email=typed[:MAX_EMAIL_LENGTH],
            error="Enter your email address, such as name@example.com.",
        )
    if context.password_checks.full:
        return _busy(request, context, email)
    return await _attempt(request, context, email, password, ip)


async def _attempt(
    request: Request, context: AppContext, email: str, password: str, ip: str | None
) -> Response:
    """One attempt: reserved against its account (or unknown email), then checked."""
    async with context.sessions() as session:
        user = await find_by_email(session, email)
        account = await session.get(Account, user.account_id) if user else None
    key = throttle.subject(user, email)
    async with transaction(context.sessions) as session:
        wait_until = await throttle.reserve(session, key)
        if wait_until is not None:
            _audit(session, Action.SIGN_IN_THROTTLED, user, email, ip)
    if wait_until is not None:
        seconds = max(1, math.ceil((wait_until - utcnow()).total_seconds()))
        logger.warning("sign-in for %s refused: throttled for %d s more", email, seconds)
        return _sign_in_form(
            request,
            context,
            status=429,
            email=email,
            error=f"Too many failed sign-ins for this email. Try again in {seconds} seconds.",
            retry_after=seconds,
        )
    # The hash is checked even for an unknown email: the answer takes as long either way.
    try:
        matches = await context.password_checks.matches(
            user.password_hash if user else None, password
        )
    except ChecksBusy:  # filled up since the check above; the attempt stays counted
        return _busy(request, context, email)
    if user is None or not matches:
        async with transaction(context.sessions) as session:
            failures = await throttle.failures(session, key)
            _audit(session, Action.SIGN_IN_FAILED, user, email, ip)
        if failures >= throttle.FREE_FAILURES:
            logger.warning("sign-in for %s failed %d times in a row", email, failures)
        return _sign_in_form(request, context, status=401, email=email, error=WRONG_CREDENTIALS)
    refusal = _refusal(user, account)
    async with transaction(context.sessions) as session:
        await throttle.clear(session, key)  # the password was right
        if refusal is not None:
            _audit(session, Action.SIGN_IN_FAILED, user, email, ip, target=refusal)
        else:
            lifetime = timedelta(hours=context.settings.console_session_hours)
            token = await start_session(session, user, lifetime)
            _audit(session, Action.SIGN_IN, user, email, ip)
    if refusal is not None:
        return _sign_in_form(request, context, status=403, email=email, error=refusal)
    response = redirect(f"{CONSOLE_PREFIX}/orgs")
    set_cookie(request, response, SESSION_COOKIE, token, int(lifetime.total_seconds()))
    clear_cookie(request, response, PRE_SESSION_COOKIE)
    return response


def _busy(request: Request, context: AppContext, email: str) -> Response:
    logger.warning("sign-in for %s refused: every password check is busy", email)
    return _sign_in_form(
        request,
        context,
        status=503,
        email=email,
        error="Too many sign-ins at this moment. Try again in a few seconds.",
        retry_after=1,
    )


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
