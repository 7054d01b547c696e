"""The eosmirror Airflow plugin: registration only. The page's code is eosmirror.airflow.lagpage."""

from airflow.plugins_manager import AirflowPlugin

from eosmirror.airflow.lagpage import LAG_APP, URL_PREFIX


class EosMirrorPlugin(AirflowPlugin):
    name = "eosmirror"
    # Mounted by the API server under /eosmirror: the page, /eosmirror/api/lag and /eosmirror/metrics.
    fastapi_apps = [{"app": LAG_APP, "url_prefix": URL_PREFIX, "name": "eosmirror lag"}]
    # The navigation entry; url_route shows the page inside the Airflow UI (Browse > Mirror lag).
    external_views = [{"name": "Mirror lag", "href": f"{URL_PREFIX}/", "destination": "nav", "category": "browse",
                       "url_route": "mirror-lag"}]
