"""The ids of eosmirror's DAGs: the DAG factories name their DAGs with them, tasks and pages find them by them."""

FENCE_DAG_ID = "eosmirror_fence"
LAG_DAG_ID = "eosmirror_lag"
MIGRATE_DAG_ID = "eosmirror_migrate"


def mirror_dag_id(name: str) -> str:
    return f"eosmirror__{name}"


def groups_dag_id(name: str) -> str:
    return f"eosmirror_groups__{name}"


def switchover_dag_id(name: str) -> str:
    return f"eosmirror_switchover__{name}"


def promote_dag_id(name: str) -> str:
    return f"eosmirror_promote__{name}"


def reverse_dag_id(name: str) -> str:
    """The DAG of `eosmirror reverse <name>`; the reverse mirror's own DAG is ``mirror_dag_id(<name>__reverse)``."""
    return f"eosmirror_reverse__{name}"


def resume_dag_id(name: str) -> str:
    """The DAG of `eosmirror resume <name>` (the switch back itself is ``switchover_dag_id(<name>__reverse)``)."""
    return f"eosmirror_resume__{name}"


def readiness_dag_id(name: str) -> str:
    """The DAG of `eosmirror readiness <name> --record`, daily by default."""
    return f"eosmirror_readiness__{name}"
