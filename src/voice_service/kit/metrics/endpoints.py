"""The `endpoint` label of a request: the route template its path and method match
("/api/v1/voices/{voice_id}"), never the raw path, so ids do not become label values."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi.routing import RouteContext, iter_route_contexts
from starlette.routing import BaseRoute, Match

NO_ROUTE = "none"  # an unknown path (404), or a request malformed before its path


# Paths named so far: matching walks the routes, a regular expression each, and every
# request is named. Bounded, since paths carry ids; dropped whole when full.
MAX_REMEMBERED = 4096


class EndpointNames:
    def __init__(self) -> None:
        self._routes: list[RouteContext] = []
        self._named: dict[tuple[str, str], str] = {}
        self._fixed: dict[tuple[str, str], str] = {}  # requests of other protocols than HTTP

    def use(self, routes: Sequence[BaseRoute]) -> None:
        """Name endpoints after the app's routes, once every router is included (FastAPI
        keeps included routers as a tree; this flattens it)."""
        self._routes = [route for route in iter_route_contexts(routes) if route.path_format]
        self._named.clear()

    def name(self, method: str, paths: Sequence[str]) -> None:
        """Requests of another protocol (Wyoming's), logged as `method` and one of `paths`:
        each path is its own endpoint."""
        self._fixed.update({(method, path): path for path in paths})

    def of(self, method: str, path: str) -> str:
        """The template of the route Starlette picks: the first that matches path and
        method, else the first that matches the path (answered 405)."""
        name = self._fixed.get((method, path)) or self._named.get((method, path))
        if name is None:
            if len(self._named) >= MAX_REMEMBERED:
                self._named.clear()
            name = self._named[method, path] = self._match(method, path)
        return name

    def _match(self, method: str, path: str) -> str:
        # HEAD is answered as GET (middleware.HeadAsGetMiddleware); the log keeps HEAD.
        scope = {"type": "http", "method": "GET" if method == "HEAD" else method, "path": path}
        partial: str | None = None
        for route in self._routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return str(route.path_format)
            if match is Match.PARTIAL and partial is None:
                partial = route.path_format
        return partial or NO_ROUTE
