"""A cluster as eosmirror uses it: its role, its settings, how messages name it, its admin client.

One value instead of (settings, admin, label) triples riding through every signature. The settings
hold secrets: they are never part of repr() or a message; ``label`` is what errors and reports say.
A ``Cluster`` is never pickled: a slot's task carries settings and label, and the executor builds
its own ``Cluster.from_settings`` (an admin client cannot travel).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from eosmirror.core.config import ClusterRef
from eosmirror.kafka import clients, connections


def cluster_label(role: str, ref: ClusterRef, settings: dict[str, Any]) -> str:
    """How errors and reports name a cluster: role, reference and bootstrap (never a secret)."""
    return f"{role} cluster ({ref.describe()}, {settings.get('bootstrap.servers', '?')})"


@dataclass
class Cluster:
    role: str                                        # "source" or "target"
    ref: ClusterRef | None                           # None: known by settings only (executors, tools)
    settings: dict[str, Any] = field(repr=False)     # librdkafka settings, secrets included
    label: str = ""
    client_name: str = "eosmirror"
    _admin: Any = field(default=None, repr=False)
    _admin_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @classmethod
    def resolve(cls, role: str, ref: ClusterRef, mirror_name: str) -> "Cluster":
        settings = connections.resolve(ref, f"mirror {mirror_name!r}: {role}")
        return cls(role=role, ref=ref, settings=settings, label=cluster_label(role, ref, settings),
                   client_name=f"{mirror_name}-{role}")

    @classmethod
    def from_settings(cls, role: str, settings: dict[str, Any], label: str | None = None,
                      client_name: str = "eosmirror") -> "Cluster":
        """A cluster known by its resolved settings (a slot's task, a tool): messages name it ``label``
        (the role when none is given)."""
        return cls(role=role, ref=None, settings=settings, label=label or role, client_name=client_name)

    @property
    def admin(self) -> Any:
        """This cluster's admin client, built on first use and kept for the run (once, even when
        threads of a pool ask for it at the same time)."""
        with self._admin_lock:
            if self._admin is None:
                self._admin = clients.admin_client(self.settings, self.client_name)
            return self._admin

    @property
    def first_bootstrap(self) -> str:
        return str(self.settings.get("bootstrap.servers", "")).split(",")[0].strip()
