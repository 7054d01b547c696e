"""The only module that builds confluent-kafka clients, one function per role.

Each role forces the settings exactly-once copying depends on. A user setting that contradicts one
of them is refused with the reason, instead of being silently overridden (the same stance as
MirrorMaker 2's ``validateExactlyOnceConfigs``): an operator who wrote ``isolation.level:
read_uncommitted`` meant something, and must learn why it cannot work.

Roles:
  source consumer      reads [start, end) of the slot's partitions, read_committed
  transactional producer   writes records + progress + offset syncs in one transaction
  idempotent producer  the at_least_once delivery mode
  progress reader      reads the committed progress (require_stable) and supplies group metadata
  admin                topics, offsets, configs

Settings given by the user are merged in this order: cluster config (connection), role overrides
from the mirror definition, then the forced settings (after the contradiction check).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Mapping

from eosmirror.core.clientrules import (
    ADMIN_DEFAULTS,
    CONSUMER_ONLY_PREFIXES,
    FOLLOW_READER_DEFAULTS,
    IDEMPOTENT_PRODUCER_FORCED,
    PRODUCER_DEFAULTS,
    PRODUCER_ONLY_PREFIXES,
    RANGE_READER_DEFAULTS,
    READER_CONSUMER_DEFAULTS,
    SOURCE_CONSUMER_DEFAULTS,
    SOURCE_CONSUMER_FORCED,
    TRANSACTIONAL_PRODUCER_FORCED,
    drop_foreign,
    merge_forced,
)
from eosmirror.core.errors import ConfigError

# Which settings are secret is decided in ONE place, eosmirror.core.secrets; re-exported for callers.
from eosmirror.core.secrets import is_secret_key, redact  # noqa: F401

log = logging.getLogger(__name__)


# librdkafka reports a failed SASL/SSL handshake only as an error event; a request then just sees
# "all brokers down". Recording those events lets a failed call say "authentication failed".
_AUTH_FAILURES: list[tuple[float, str]] = []
_AUTH_ERROR_NAMES = {"_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "_SSL"}


def _record_error(err: Any) -> None:
    if err.name() in _AUTH_ERROR_NAMES:
        _AUTH_FAILURES.append((time.monotonic(), err.str()))
        del _AUTH_FAILURES[:-20]


def recent_authentication_failure(within: float = 60.0) -> str | None:
    """The text of an authentication failure any client saw in the last ``within`` seconds."""
    cutoff = time.monotonic() - within
    recent = [text for at, text in _AUTH_FAILURES if at >= cutoff]
    return recent[-1] if recent else None


def _with_logger(conf: dict[str, Any], name: str) -> dict[str, Any]:
    """Name the client and record authentication failures.

    No Python ``logger`` is installed: confluent-kafka calls it from librdkafka's own threads until
    the client forwards logs to its poll queue, and with short-lived admin clients that crashed the
    interpreter (SIGSEGV, reproduced while SASL brokers were still starting). librdkafka then logs
    to stderr in its own format (``%4|<time>|<FACILITY>|<client.id>| ...``), which lands in the task
    log, filtered by ``librdkafka_log_level``. ``error_cb`` only runs inside poll() on the caller's thread.
    """
    conf.setdefault("client.id", name)
    conf.setdefault("error_cb", _record_error)
    conf.setdefault("log_level", librdkafka_log_level())
    return conf


# librdkafka's own stderr lines (syslog levels: 3 error, 4 warning, 6 info, 7 debug). An unreachable
# cluster makes it print a `%3|...|FAIL|... Connection refused` line per broker and retry, hundreds in
# all, while eosmirror itself reports the failure once, naming the cluster and the cause. So by
# default only critical lines pass; EOSMIRROR_KAFKA_LOG_LEVEL (or `log_level` in a cluster's config)
# lets them through again, e.g. 7 with `debug: broker,protocol` when diagnosing a connection.
KAFKA_LOG_LEVEL_ENV = "EOSMIRROR_KAFKA_LOG_LEVEL"
_LOG_LEVEL_NAMES = {"critical": 2, "error": 3, "warning": 4, "notice": 5, "info": 6, "debug": 7}


def librdkafka_log_level() -> int:
    raw = (os.environ.get(KAFKA_LOG_LEVEL_ENV) or "critical").strip().lower()
    if raw in _LOG_LEVEL_NAMES:
        return _LOG_LEVEL_NAMES[raw]
    if raw.isdigit() and 0 <= int(raw) <= 7:
        return int(raw)
    raise ConfigError(f"{KAFKA_LOG_LEVEL_ENV}={raw!r}: expected 0-7 or one of {', '.join(_LOG_LEVEL_NAMES)}")


def source_consumer(settings: Mapping[str, Any], overrides: Mapping[str, Any], group_id: str,
                    client_id: str, where: str = "source consumer", follow: bool = False,
                    defaults: Mapping[str, Any] | None = None) -> Any:
    """A consumer that reads exact offset ranges with read_committed and never commits on its own.

    ``group_id`` is the mirror's progress group: the consumer never joins it (it uses assign()), it
    only lets the after-commit step publish progress on the source cluster for lag tools.
    ``follow``: the slot of a follow run (FOLLOW_READER_DEFAULTS); otherwise a bounded range reader
    (RANGE_READER_DEFAULTS). ``defaults``: more defaults of this slot (a capped slot's queue: core/bandwidth.py);
    the cluster's settings and the mirror's overrides win over them.
    """
    from confluent_kafka import Consumer

    return Consumer(source_consumer_config(settings, overrides, group_id, client_id, where, follow, defaults))


def source_consumer_config(settings: Mapping[str, Any], overrides: Mapping[str, Any], group_id: str,
                           client_id: str, where: str = "source consumer", follow: bool = False,
                           defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings ``source_consumer`` builds its consumer with (the forced ones win, or refuse)."""
    conf = {**READER_CONSUMER_DEFAULTS, **(FOLLOW_READER_DEFAULTS if follow else RANGE_READER_DEFAULTS),
            **SOURCE_CONSUMER_DEFAULTS, **(defaults or {}), **drop_foreign(settings, PRODUCER_ONLY_PREFIXES)}
    conf.update(overrides)
    conf = merge_forced("source consumer", conf, SOURCE_CONSUMER_FORCED, where)
    conf["group.id"] = group_id
    return _with_logger(conf, client_id)


def transactional_producer(settings: Mapping[str, Any], overrides: Mapping[str, Any], transactional_id: str,
                           transaction_timeout_ms: int, client_id: str,
                           where: str = "target producer", extra: Mapping[str, Any] | None = None) -> Any:
    """A producer whose ``init_transactions()`` fences every older instance of ``transactional_id``."""
    from confluent_kafka import Producer

    return Producer(transactional_producer_config(settings, overrides, transactional_id, transaction_timeout_ms,
                                                  client_id, where, extra))


def transactional_producer_config(settings: Mapping[str, Any], overrides: Mapping[str, Any], transactional_id: str,
                                  transaction_timeout_ms: int, client_id: str, where: str = "target producer",
                                  extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings ``transactional_producer`` builds with: PRODUCER_DEFAULTS (connected to every
    broker at once), the cluster's, ``extra``, the mirror's overrides; the forced ones win, or refuse."""
    conf = {**PRODUCER_DEFAULTS, **drop_foreign(settings, CONSUMER_ONLY_PREFIXES)}
    conf.update(extra or {})
    conf.update(overrides)
    conf = merge_forced("transactional producer", conf, TRANSACTIONAL_PRODUCER_FORCED, where)
    conf["transactional.id"] = transactional_id
    conf["transaction.timeout.ms"] = int(transaction_timeout_ms)
    return _with_logger(conf, client_id)


def idempotent_producer(settings: Mapping[str, Any], overrides: Mapping[str, Any], client_id: str,
                        where: str = "target producer", extra: Mapping[str, Any] | None = None) -> Any:
    """The at_least_once producer: no duplicates from retries, no transactions."""
    from confluent_kafka import Producer

    return Producer(idempotent_producer_config(settings, overrides, client_id, where, extra))


def idempotent_producer_config(settings: Mapping[str, Any], overrides: Mapping[str, Any], client_id: str,
                               where: str = "target producer", extra: Mapping[str, Any] | None = None
                               ) -> dict[str, Any]:
    """The settings ``idempotent_producer`` builds with (the forced ones win, or refuse)."""
    conf = {**PRODUCER_DEFAULTS, **drop_foreign(settings, CONSUMER_ONLY_PREFIXES)}
    conf.update(extra or {})
    conf.update(overrides)
    conf = merge_forced("idempotent producer", conf, IDEMPOTENT_PRODUCER_FORCED, where)
    return _with_logger(conf, client_id)


def observation_producer(settings: Mapping[str, Any], client_id: str, where: str = "lag writer",
                         extra: Mapping[str, Any] | None = None) -> Any:
    """The lag history's writer (samples, run outcomes): acks=all, not idempotent.

    Those records are observations, not data: a retry that writes one twice changes no figure (readers
    take samples by time and the last outcome of a run). An idempotent producer's first record waits
    for its producer id, which every run would pay for its one lag record.
    """
    from confluent_kafka import Producer

    return Producer(observation_producer_config(settings, client_id, extra))


def observation_producer_config(settings: Mapping[str, Any], client_id: str,
                                extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    conf = drop_foreign(settings, CONSUMER_ONLY_PREFIXES)
    conf.update(extra or {})
    conf.update({"acks": "all", "enable.idempotence": False})
    return _with_logger(conf, client_id)


MEMBERLESS_CLOSE_MS = 6000   # session.timeout.ms of consumers that never join: bounds their close()


def progress_reader(settings: Mapping[str, Any], group_id: str, client_id: str, stable: bool = True,
                    on_commit: Any = None) -> Any:
    """A never-assigned consumer of the progress group on the target.

    ``committed()`` on it reads the progress: with ``stable`` (read_committed) it sends require_stable
    and waits while a transactional commit is pending (KIP-447). Its ``consumer_group_metadata()``
    (generation -1, no member) is what ``send_offsets_to_transaction`` needs for a member-less group,
    and it commits progress in the at_least_once mode.
    """
    from confluent_kafka import Consumer

    conf = drop_foreign(settings, PRODUCER_ONLY_PREFIXES)
    conf.update({"group.id": group_id, "isolation.level": "read_committed" if stable else "read_uncommitted",
                 "enable.auto.commit": False, "enable.auto.offset.store": False,
                 # It never joins the group, so the session timeout means nothing to the broker; but
                 # librdkafka's close() waits up to this long for a coordinator it cannot find (no
                 # Read on the group): the default would hold every slot of such a run for 45 s.
                 "session.timeout.ms": MEMBERLESS_CLOSE_MS})
    if on_commit is not None:   # publishing progress to the source group commits asynchronously
        conf["on_commit"] = on_commit
    return Consumer(_with_logger(conf, client_id))


def plain_consumer(settings: Mapping[str, Any], client_id: str, read_committed: bool = True,
                   group_id: str | None = None) -> Any:
    """A consumer for reading internal topics and for verification; never subscribes, never commits.

    A consumer with a group.id looks up that group's coordinator, which needs Describe on the group:
    the mirror's readers pass its progress group (already granted), never a group of their own.
    """
    from confluent_kafka import Consumer

    conf = {**READER_CONSUMER_DEFAULTS, **RANGE_READER_DEFAULTS, **drop_foreign(settings, PRODUCER_ONLY_PREFIXES)}
    conf.update({"group.id": group_id or f"{client_id}.reader", "enable.auto.commit": False,
                 "enable.auto.offset.store": False, "enable.partition.eof": True,
                 "auto.offset.reset": "error",
                 "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    return Consumer(_with_logger(conf, client_id))


def admin_client(settings: Mapping[str, Any], role_hint: str = "admin") -> Any:
    from confluent_kafka.admin import AdminClient

    conf = {**ADMIN_DEFAULTS, **drop_foreign(drop_foreign(settings, PRODUCER_ONLY_PREFIXES), CONSUMER_ONLY_PREFIXES)}
    return AdminClient(_with_logger(conf, f"eosmirror-{role_hint}"))


def check_slot_settings(source_settings: Mapping[str, Any], target_settings: Mapping[str, Any], mirror: Any,
                        where: str) -> None:
    """librdkafka's own check of the settings a run's slots will build their clients with (the cluster's
    plus the mirror's ``source_consumer`` / ``target_producer``): a value it cannot parse (``fetch.wait.max.ms:
    soon``) or a property it does not know is a ConfigError here, on the driver, before a target topic is
    created; inside the slots it failed every slot as a copy error (exit 1, which a scheduler retries).
    The clients are built and dropped at once: no request is sent that needs an answer."""
    from confluent_kafka import Consumer, KafkaException, Producer

    def consumer() -> Any:
        return Consumer(source_consumer_config(source_settings, mirror.source_consumer, "eosmirror-settings-check",
                                               "eosmirror-settings-check"))

    def producer() -> Any:
        name = "eosmirror-settings-check"
        return Producer(transactional_producer_config(target_settings, mirror.target_producer, name, 60_000, name)
                        if mirror.delivery == "exactly_once" else
                        idempotent_producer_config(target_settings, mirror.target_producer, name))

    for field, build in (("source_consumer", consumer), ("target_producer", producer)):
        try:
            client = build()
        except KafkaException as exc:
            said = exc.args[0].str()
            for conf in (source_settings, target_settings, mirror.source_consumer, mirror.target_producer):
                for key, value in conf.items():   # librdkafka may quote a value it refuses: never a secret
                    if is_secret_key(str(key)) and str(value):
                        said = said.replace(str(value), "<hidden>")
            raise ConfigError(f"{where}: {field} (with the cluster's settings): librdkafka refuses them: "
                              f"{said}. Fix or remove the setting.") from None
        if field == "source_consumer":
            client.close()


# ---- the broker connection of the ApiVersions read (kafka/apiversions.py) ------------------------------------------
# Not a librdkafka client: one socket, one request that needs no authentication (a broker answers ApiVersions
# before SASL, as librdkafka itself asks it first), with the cluster's TLS settings. It lives here so that the
# cluster's security settings become a connection in this one module. Supported TLS settings: below; any other
# ``ssl.*`` setting (an engine, providers, ...) cannot be honoured outside librdkafka, and the read says so.
TLS_SETTINGS = {"ssl.ca.location", "ssl.ca.pem", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
                "ssl.certificate.pem", "ssl.key.pem", "ssl.keystore.location", "ssl.keystore.password",
                "ssl.crl.location", "ssl.cipher.suites", "enable.ssl.certificate.verification",
                "ssl.endpoint.identification.algorithm"}


class UnsupportedConnection(Exception):
    """The cluster's settings ask for something only librdkafka can do (the caller says what it skipped)."""


def uses_tls(settings: Mapping[str, Any]) -> bool:
    return str(settings.get("security.protocol", "plaintext")).lower() in ("ssl", "sasl_ssl")


def broker_connection(settings: Mapping[str, Any], host: str, port: int, timeout: float) -> Any:
    """A connected socket to ``host:port``, wrapped in TLS as the cluster's settings say (certificates
    verified, the host name checked unless the settings turn either off)."""
    import socket

    if not uses_tls(settings):
        return socket.create_connection((host, port), timeout=timeout)
    unsupported = sorted(k for k in settings if str(k).startswith("ssl") and k not in TLS_SETTINGS)
    if unsupported:
        raise UnsupportedConnection(f"TLS settings only librdkafka can honour: {', '.join(unsupported)}")
    context = _tls_context(settings)
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise


def _tls_context(settings: Mapping[str, Any]) -> Any:
    import ssl
    import tempfile

    # Verifying, checking the host name; the system's CA store only when the settings name no CA, as librdkafka
    # does (loading it took about 100 ms a context on this busy 2-core host).
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca = str(settings.get("ssl.ca.location") or "")
    if ca in ("", "probe") and not settings.get("ssl.ca.pem"):
        context.load_default_certs()
    if str(settings.get("enable.ssl.certificate.verification", "true")).lower() == "false":
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    elif str(settings.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        context.check_hostname = False
    if ca and ca != "probe" and os.path.isdir(ca):
        context.load_verify_locations(capath=ca)
    elif ca and ca != "probe":
        context.load_verify_locations(cafile=ca)
    if settings.get("ssl.ca.pem"):
        context.load_verify_locations(cadata=str(settings["ssl.ca.pem"]))
    if settings.get("ssl.crl.location"):
        context.load_verify_locations(cafile=str(settings["ssl.crl.location"]))
        context.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if settings.get("ssl.cipher.suites"):
        context.set_ciphers(str(settings["ssl.cipher.suites"]))
    password = settings.get("ssl.key.password")
    if settings.get("ssl.certificate.location"):
        context.load_cert_chain(str(settings["ssl.certificate.location"]), settings.get("ssl.key.location"), password)
    elif settings.get("ssl.certificate.pem") or settings.get("ssl.keystore.location"):
        cert, key = _client_pem(settings)
        with tempfile.TemporaryDirectory(prefix="eosmirror-tls-") as folder:   # 0700; gone right after the load
            path = os.path.join(folder, "client.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(cert + "\n" + key)
            context.load_cert_chain(path, password=password)
    return context


def _client_pem(settings: Mapping[str, Any]) -> tuple[str, str]:
    """(certificate chain, private key) as PEM text, from ``ssl.certificate.pem``/``ssl.key.pem`` or a PKCS#12
    ``ssl.keystore.location``."""
    if settings.get("ssl.certificate.pem"):
        return str(settings["ssl.certificate.pem"]), str(settings.get("ssl.key.pem") or "")
    try:
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12
    except ImportError:
        raise UnsupportedConnection("a PKCS#12 ssl.keystore.location needs the `cryptography` package") from None
    secret = settings.get("ssl.keystore.password")
    with open(str(settings["ssl.keystore.location"]), "rb") as source:
        try:
            key, cert, chain = pkcs12.load_key_and_certificates(source.read(),
                                                                 str(secret).encode() if secret else None)
        except ValueError as exc:   # a wrong password, a file of another kind: its text holds no secret
            raise UnsupportedConnection(f"ssl.keystore.location could not be read as PKCS#12 ({exc})") from None
    if key is None or cert is None:
        raise UnsupportedConnection("ssl.keystore.location holds no private key and certificate")
    certs = "".join(c.public_bytes(Encoding.PEM).decode() for c in [cert, *chain])
    return certs, key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
