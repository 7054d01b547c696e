"""The one place eosmirror reaches into apache-airflow-providers-apache-spark's private members.

The provider offers no public way to read spark-submit's output (the job's run report is its last line) nor to
rebuild the hook after the operator's arguments change, so the copy operator uses exactly these members, all of
them checked against the installed provider by ``tests/unit/test_spark_adapter.py`` (which fails when a release
renames or removes one):

* ``SparkSubmitOperator._get_hook()`` builds the hook from the operator's arguments, and ``_hook`` caches it;
* ``SparkSubmitHook._process_spark_submit_log(itr)`` consumes spark-submit's output lines (``submit`` calls it);
* ``SparkSubmitHook._submit_sp`` is the spark-submit process (``submit`` sets it, ``on_kill`` kills it);
* ``SparkSubmitHook._build_spark_submit_command(application)`` is the command ``submit`` runs; for a client-mode
  submit it also moves the operator's ``_env_vars`` to ``_env``, the environment ``submit`` adds to the process.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

# The members this module relies on, per class; the adapter test checks each against the installed provider.
OPERATOR_MEMBERS = ("_get_hook", "_hook")
HOOK_MEMBERS = ("_process_spark_submit_log", "_submit_sp", "_build_spark_submit_command", "_env", "_env_vars")


def rebuild_hook(operator: Any) -> None:
    """Drop the cached hook: the next submit builds it from the operator's current arguments and environment."""
    operator._hook = None


def tap_output(hook: Any, tap: Callable[[Iterable[Any]], Iterator[Any]]) -> Any:
    """Pass spark-submit's output lines through ``tap`` before the provider reads them (for its own log and
    status parsing); returns the hook."""
    process = hook._process_spark_submit_log
    hook._process_spark_submit_log = lambda itr: process(tap(itr))
    return hook


def replace_command(hook: Any, command: list[str]) -> Any:
    """Make the hook run ``command`` instead of spark-submit (a run for the run server), with everything
    else of ``submit`` and ``on_kill`` unchanged; returns the hook."""
    def build(application: str) -> list[str]:
        hook._env = hook._env_vars   # as the provider's builder does for a client-mode submit
        return list(command)

    hook._build_spark_submit_command = build
    return hook


def submit_process(operator: Any) -> Any:
    """The spark-submit process of the operator's hook, or None when none was started."""
    return getattr(getattr(operator, "_hook", None), "_submit_sp", None)
