"""Rendering console pages: one Jinja environment (autoescaped), every response with the
console's security headers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from voice_service.console.security import secure_headers
from voice_service.console.words import noun, quantity
from voice_service.core.models import Organization
from voice_service.tenancy.console_sessions import SignedIn
from voice_service.voices.schemas import resemblance_word

CONSOLE_PREFIX = "/console"

_templates = Environment(
    loader=PackageLoader("voice_service.console", "templates"),
    # Everything a tenant typed (key names, voice names, descriptions) is escaped.
    autoescape=select_autoescape(default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(value: datetime | None, empty: str = "Never") -> str:
    # UTC, which the column headers say: the time stays short enough not to wrap.
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else empty


def _wrappable(text: str) -> Markup:
    """Escaped text that may break before a slash and after an underscore: a long path or
    error code wraps at its parts in a narrow column instead of widening the table."""
    return escape(text).replace("/", Markup("<wbr>/")).replace("_", Markup("_<wbr>"))


_templates.filters["when"] = _when
_templates.filters["noun"] = noun
_templates.filters["quantity"] = quantity
_templates.filters["wrappable"] = _wrappable
_templates.filters["resemblance_word"] = resemblance_word


def render(
    request: Request,
    template: str,
    *,
    user: SignedIn | None = None,
    org: Organization | None = None,
    status: int = 200,
    csrf_token: str | None = None,
    **values: Any,
) -> HTMLResponse:
    html = _templates.get_template(template).render(
        request=request,
        user=user,
        org=org,
        csrf_token=csrf_token or (user.csrf_token if user else ""),
        static=f"{CONSOLE_PREFIX}/static",
        org_url=f"{CONSOLE_PREFIX}/orgs/{org.id}" if org else None,
        **values,
    )
    response = HTMLResponse(html, status_code=status)
    secure_headers(response)
    return response


def redirect(url: str) -> RedirectResponse:
    response = RedirectResponse(url, status_code=303)
    secure_headers(response)
    return response
