"""Which settings hold a secret: the ONE rule, used wherever a setting is printed, logged, stored or
refused (config errors, inline-secret check, import-mm2's comments, client-config redaction).

A key is secret when its lower-cased name contains one of ``MARKERS``. Substrings, not exact names,
so that prefixed spellings are caught too: MM2's ``A.sasl.jaas.config``,
``A->B.consumer.ssl.key.password``, Spark's ``spark.ssl.keyPassword``. Hiding a harmless value
(``sasl.oauthbearer.token.endpoint.url``) costs nothing; printing a secret cannot be undone.

The markers cover every secret property of (tests/unit/test_secrets.py holds the lists;
tests/integration/test_mm2_selection.py re-reads Kafka's from the jars):
  * Kafka's Java clients, MirrorMaker 2 and Connect: every ``ConfigDef.Type.PASSWORD`` key (Kafka 4.3:
    sasl.jaas.config, sasl.oauthbearer.assertion.private.key.passphrase,
    sasl.oauthbearer.client.credentials.client.secret, ssl.key.password, ssl.keystore.certificate.chain,
    ssl.keystore.key, ssl.keystore.password, ssl.truststore.certificates, ssl.truststore.password);
  * librdkafka's sensitive properties (CONFIGURATION.md): sasl.password, ssl.key.password, ssl.key.pem,
    ssl_key, ssl.keystore.password, sasl.oauthbearer.config, sasl.oauthbearer.client.secret,
    sasl.oauthbearer.assertion.private.key.pem / .passphrase;
  * Schema Registry clients: basic.auth.user.info, bearer.auth.token.
"""

from __future__ import annotations

from typing import Any, Mapping

MARKERS = ("password", "passphrase", "secret", "jaas", "token", "credential", "private", "key.pem", "ssl_key",
           "keystore.key", "oauthbearer.config", "user.info", "certificate.chain", "truststore.certificates")


class _Hidden(str):
    """What a secret value is replaced by: the text ``<hidden>``, also in a repr() (no quotes)."""

    def __repr__(self) -> str:
        return str(self)


HIDDEN = _Hidden("<hidden>")


def is_secret_key(key: str) -> bool:
    return any(marker in str(key).lower() for marker in MARKERS)


def redact(value: Any, key: Any = None) -> Any:
    """``value`` with every value under a secret key (at any depth of mappings and lists) replaced by
    ``HIDDEN``; safe to print, log or store (it is still a str for JSON)."""
    if key is not None and is_secret_key(str(key)):
        return HIDDEN
    if isinstance(value, Mapping):
        return {k: redact(v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def shown(key: str, value: Any) -> str:
    """``key = value`` as a line of text, the value hidden when the key is secret."""
    return f"{key} = {redact(value, key)}"
