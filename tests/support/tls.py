"""A test certificate authority (made with ``cryptography``) and a local SASL_SSL broker that requires client
certificates: the TLS the ApiVersions read must reproduce from librdkafka's settings."""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import shutil
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from eosmirror_tools.kit import cluster


@dataclass(frozen=True)
class Pki:
    folder: Path
    ca: Path            # the CA's certificate (PEM)
    server: Path        # the broker's private key and certificate chain (PKCS#12, password KEYSTORE_PASSWORD)
    client_cert: str    # PEM text
    client_key: str     # PEM text (unencrypted)
    client_p12: Path    # the client's key and certificate as PKCS#12, password KEYSTORE_PASSWORD


KEYSTORE_PASSWORD = "p12-pass"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _issue(subject: str, key, issuer_name: x509.Name, issuer_key, ca: bool = False) -> x509.Certificate:
    now = dt.datetime.now(dt.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _key_pem(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def make_pki(folder: Path) -> Pki:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _issue("eosmirror test CA", ca_key, _name("eosmirror test CA"), ca_key, ca=True)
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    server_cert = _issue("127.0.0.1", server_key, ca_cert.subject, ca_key)
    client_cert = _issue("mirror", client_key, ca_cert.subject, ca_key)
    (folder / "ca.pem").write_text(_pem(ca_cert))
    (folder / "server.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", server_key, server_cert, [ca_cert], serialization.BestAvailableEncryption(KEYSTORE_PASSWORD.encode())))
    (folder / "client.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"mirror", client_key, client_cert, [ca_cert],
        serialization.BestAvailableEncryption(KEYSTORE_PASSWORD.encode())))
    return Pki(folder, folder / "ca.pem", folder / "server.p12", _pem(client_cert), _key_pem(client_key),
               folder / "client.p12")


def tls_broker(name: str, port: int, pki: Pki, passwords: dict[str, str]) -> cluster.LocalCluster:
    """A SASL_SSL (PLAIN) broker with ACLs, requiring a client certificate signed by ``pki``'s CA."""
    users = " ".join(f'user_{u}="{pw}"' for u, pw in sorted(passwords.items()))
    return cluster.LocalCluster(name=name, port=port, sasl_users=dict(passwords), overrides={
        "listeners": f"SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}",
        "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="{passwords["admin"]}" {users};',
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(pki.server),
        "ssl.keystore.password": KEYSTORE_PASSWORD, "ssl.key.password": KEYSTORE_PASSWORD,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
        "listener.name.sasl_ssl.ssl.client.auth": "required",   # KIP-684: SASL_SSL takes it by listener only
    })


def client_settings(broker: cluster.LocalCluster, pki: Pki, user: str = "admin") -> dict[str, str]:
    """librdkafka settings for ``broker``: SASL_SSL, the test CA, the client certificate as PEM text."""
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": broker.sasl_users[user], "ssl.ca.location": str(pki.ca),
            "ssl.certificate.pem": pki.client_cert, "ssl.key.pem": pki.client_key}


@contextlib.contextmanager
def running(broker: cluster.LocalCluster):
    """``broker`` started on fresh storage, stopped (and its storage removed) at the end."""
    cluster.stop(broker)
    shutil.rmtree(broker.data_dir, ignore_errors=True)
    try:
        cluster.launch(broker)
        yield broker
    finally:
        cluster.stop(broker)
        shutil.rmtree(broker.data_dir, ignore_errors=True)
