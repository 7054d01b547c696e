"""The "Mirror lag" page and ``/eosmirror/metrics``: a FastAPI app the Airflow API server mounts.

Every route requires what reading the ``eosmirror_lag`` DAG requires, checked by Airflow's own auth
manager dependency (``requires_access_dag``): a plugin app is anonymous unless it checks, so an
anonymous request gets 401 and never data. The figures come from ``driver.lag.report_all``, the
function behind `eosmirror lag --json`; the readiness column, page and metrics from the reports recorded on each
mirror's lag topic (``driver.readiness``, `eosmirror readiness --record` and its DAG).

``LAG_APP`` builds the FastAPI app on its first request (the plugin module stays cheap to import in
every Airflow component that loads plugins).
"""

from __future__ import annotations

import threading
from typing import Any, Awaitable, Callable

from eosmirror.airflow import lagrender
from eosmirror.airflow.dagids import LAG_DAG_ID
from eosmirror.core import config, lagview
from eosmirror.core.errors import ConfigError
from eosmirror.driver import lag, readiness
from eosmirror.kafka.lagstore import now_ms

URL_PREFIX = "/eosmirror"
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]   # (scope, receive, send): the ASGI server's own objects


def _statuses(mirror: str | None = None) -> tuple[list[Any], int]:
    now = now_ms()
    return lag.report_all(config.load(), mirror, now_ms=now), now


def create_app() -> Any:
    from airflow.api_fastapi.core_api.security import requires_access_dag
    from fastapi import Depends, FastAPI, HTTPException
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    app = FastAPI(title="eosmirror lag", dependencies=[Depends(requires_access_dag("GET", param_dag_id=LAG_DAG_ID))])

    def known(name: str) -> None:
        try:
            config.load().get(name)
        except ConfigError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from None

    @app.get("/", response_class=HTMLResponse)
    def overview() -> str:
        statuses, now = _statuses()
        return lagrender.overview(statuses, now, readiness.latest_of(list(config.load().mirrors), now))

    @app.get("/mirror/{name}", response_class=HTMLResponse)
    def mirror_page(name: str, range: str = "24h") -> str:  # noqa: A002 - the query parameter's name
        known(name)
        window = range if range in lagrender.RANGES else "24h"
        (status,), now = _statuses(name)
        # At least a day: the recovery point's percentiles cover the last hour and day whatever the chart's range.
        samples = lag.history(config.load().get(name), now - max(lagrender.RANGES[window], lagrender.RANGES["24h"]))
        return lagrender.mirror_page(status, samples, window, now)

    @app.get("/readiness/{name}", response_class=HTMLResponse)
    def readiness_page(name: str) -> str:
        known(name)
        now = now_ms()
        since = now - lagrender.RANGES["7d"]
        history = readiness.history(config.load().get(name), since)
        return lagrender.readiness_page(name, history, since, now)

    @app.get("/api/lag")
    def figures(mirror: str | None = None) -> JSONResponse:
        if mirror:
            known(mirror)
        statuses, now = _statuses(mirror or None)
        return JSONResponse(lagview.document(statuses, now))

    @app.get("/metrics")
    def metrics() -> Response:
        statuses, now = _statuses()
        body, content_type = lagrender.metrics(statuses, now, readiness.latest_of(list(config.load().mirrors), now))
        return Response(content=body, media_type=content_type)

    return app


class LazyApp:
    """An ASGI app that builds the real one (``factory``) on its first request."""

    def __init__(self, factory: Callable[[], ASGIApp]):
        self._factory, self._lock = factory, threading.Lock()
        self._app: ASGIApp | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        app = self._app
        if app is None:
            with self._lock:
                if self._app is None:
                    self._app = self._factory()
                app = self._app
        await app(scope, receive, send)


LAG_APP = LazyApp(create_app)
