"""Bounded waits on Kafka futures and calls, and Kafka errors translated into eosmirror errors.

Every broker interaction of the driver goes through ``call``/``wait`` with a timeout, so an
unreachable cluster fails within a bounded time with a message naming the cluster; an
authorization failure names the permission (ACL) that is missing.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Callable

from eosmirror.core.errors import (
    AuthorizationError,
    ClusterUnreachableError,
    EosMirrorError,
    OversizeRecordError,
    TargetMismatchError,
)
from eosmirror.kafka import clients

DEFAULT_TIMEOUT = 30.0

_UNREACHABLE = {"_TRANSPORT", "_TIMED_OUT", "_ALL_BROKERS_DOWN", "_RESOLVE", "REQUEST_TIMED_OUT",
                "_MSG_TIMED_OUT", "NETWORK_EXCEPTION", "_WAIT_COORD", "COORDINATOR_NOT_AVAILABLE"}
# A partition whose leader is being elected (a topic just created, a broker just restarted): retry briefly.
LEADERSHIP_MOVING = {"NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "_LEADER_NOT_AVAILABLE",
                     "NOT_LEADER_OR_FOLLOWER", "UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH"}
MISSING_TOPIC = {"UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_ID", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC"}
_AUTHORIZATION = {"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
                  "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
                  "SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION"}


def _kafka_error(exc: BaseException) -> Any:
    """The KafkaError inside a KafkaException (or None for other exceptions)."""
    args = getattr(exc, "args", ())
    return args[0] if args and hasattr(args[0], "name") and hasattr(args[0], "str") else None


def error_name(exc: BaseException) -> str:
    """The librdkafka error name of a KafkaException (or '' for other exceptions)."""
    err = _kafka_error(exc)
    return err.name() if err is not None else ""


def error_text(exc: BaseException) -> str:
    err = _kafka_error(exc)
    return err.str() if err is not None else str(exc)


def translate(exc: BaseException, what: str, cluster_label: str, needs: str | None = None) -> EosMirrorError:
    """An eosmirror error for a failed Kafka operation.

    ``what`` says what was attempted ("list topics"), ``cluster_label`` which cluster ("source 10.0.0.1:9092"),
    ``needs`` which permission the operation requires ("Describe on topic orders").
    """
    if isinstance(exc, EosMirrorError):
        return exc
    name = error_name(exc)
    detail = error_text(exc)
    if name in _AUTHORIZATION:
        if name in ("SASL_AUTHENTICATION_FAILED", "_AUTHENTICATION"):
            return AuthorizationError(f"{cluster_label}: authentication failed while trying to {what}: {detail}. "
                                      f"Check the username/password or certificates of the connection")
        permission = needs or {"TOPIC_AUTHORIZATION_FAILED": "a topic permission",
                               "GROUP_AUTHORIZATION_FAILED": "Read on the progress group",
                               "CLUSTER_AUTHORIZATION_FAILED": "a cluster permission (IdempotentWrite)",
                               "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "Write on the transactional id"}.get(name, name)
        return AuthorizationError(f"{cluster_label}: not authorized to {what} ({name}): the principal needs "
                                  f"{permission}. Grant that ACL and run again")
    if name in _UNREACHABLE or isinstance(exc, (concurrent.futures.TimeoutError, TimeoutError)):
        # A future's TimeoutError has no text of its own (it once printed "(timeout: )").
        return ClusterUnreachableError(f"{cluster_label}: no answer while trying to {what} ({name or 'timeout'}: "
                                       f"{detail or 'no reply within the time allowed'}). Check that the "
                                       f"cluster is up and reachable from this host")
    if name == "_UNSUPPORTED_FEATURE" and "metadata" in detail.lower():
        # A KRaft controller listener accepts the connection but serves no client Metadata request.
        return ClusterUnreachableError(f"{cluster_label}: the address answers but does not serve Kafka clients while "
                                       f"trying to {what} ({name}: {detail}). Is it a KRaft controller port? "
                                       f"Point bootstrap.servers at the brokers' client listener")
    if name in ("MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "MESSAGE_TOO_LARGE"):
        return OversizeRecordError(f"{cluster_label}: {what}: a record is larger than the target accepts ({detail})")
    if name in MISSING_TOPIC:
        return TargetMismatchError(f"{cluster_label}: {what}: topic or partition does not exist ({detail})")
    return EosMirrorError(f"{cluster_label}: failed to {what}: {name or type(exc).__name__}: {detail}")


def wait(future: Any, what: str, cluster_label: str, needs: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> Any:
    try:
        return future.result(timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - translated below
        raise translate(exc, what, cluster_label, needs) from None


def call(fn: Callable[..., Any], what: str, cluster_label: str, needs: str | None = None, *args: Any,
         **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - translated below
        if error_name(exc) in _UNREACHABLE:
            _drain_error_events(getattr(fn, "__self__", None))
            auth = clients.recent_authentication_failure()
            if auth:
                raise AuthorizationError(f"{cluster_label}: authentication failed while trying to {what}: {auth}. "
                                         f"Check the credentials (sasl.username/sasl.password, certificates) of "
                                         f"this cluster's connection") from None
        raise translate(exc, what, cluster_label, needs) from None


def _drain_error_events(client: Any) -> None:
    """Serve pending error events of an admin client or producer (a consumer's poll would consume)."""
    from confluent_kafka import Consumer

    if client is not None and hasattr(client, "poll") and not isinstance(client, Consumer):
        try:
            client.poll(1.0)
        except Exception:  # noqa: BLE001
            pass


def is_partition_eof(err: Any) -> bool:
    """A consumer's end-of-partition event (``enable.partition.eof``), not an error."""
    from confluent_kafka import KafkaError

    return bool(err.code() == KafkaError._PARTITION_EOF)
