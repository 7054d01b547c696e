"""The eosmirror Airflow plugin: the lag page, /eosmirror/api/lag and /eosmirror/metrics (#24).

Registered by the wheel's ``airflow.plugins`` entry point (pyproject.toml): `pip install eosmirror` is
enough, no file copied into a plugins folder. The class is built on first attribute access so that
importing eosmirror needs no Airflow, and so that a plugins-folder scan of this file (which looks only
at module attributes already set) never registers it a second time.
"""

from __future__ import annotations

import functools
from typing import Any

from eosmirror.airflow.lagpage import LAG_APP, URL_PREFIX


@functools.cache
def plugin_class() -> type:
    from airflow.plugins_manager import AirflowPlugin


    class EosMirrorPlugin(AirflowPlugin):
        name = "eosmirror"
        # Mounted by the API server under /eosmirror: the page, /eosmirror/api/lag and /eosmirror/metrics.
        fastapi_apps = [{"app": LAG_APP, "url_prefix": URL_PREFIX, "name": "eosmirror lag"}]
        # The navigation entry; url_route shows the page inside the Airflow UI (Browse > Mirror lag).
        external_views = [{"name": "Mirror lag", "href": f"{URL_PREFIX}/", "destination": "nav",
                           "category": "browse", "url_route": "mirror-lag"}]

    EosMirrorPlugin.__module__ = __name__
    return EosMirrorPlugin


def __getattr__(name: str) -> Any:
    if name == "EosMirrorPlugin":    # the entry point's target
        return plugin_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
