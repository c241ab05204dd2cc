"""A certificate made for one run, so the front door's TLS path is exercised without any real CA.

:func:`make_certificate` writes a throw-away CA and a server certificate signed by it for the
balancer's address (``cryptography``, offline): ``server.pem`` (certificate + key, the form
HAProxy's ``crt`` takes) and ``ca.pem`` (the bundle the client trusts). Keys never leave the
run's front-door directory, which ``cluster down`` removes. Both are valid for ``days`` (2): a
front door kept longer must be replaced (:func:`not_valid_after` tells when it expires).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path

SERVER_PEM = "server.pem"
CA_PEM = "ca.pem"


def make_certificate(directory: Path, host: str, days: int = 2) -> tuple[str, str]:
    """(server.pem path, ca.pem path) for ``host`` (an IP address or a name)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "availproof run CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    try:
        san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        san = x509.DNSName(host)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([san]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = directory / SERVER_PEM
    fd = os.open(pem, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    ca_path = directory / CA_PEM
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return str(pem), str(ca_path)


def not_valid_after(pem: Path) -> float | None:
    """When the certificate in ``pem`` (the first one, e.g. of ``server.pem``) expires, in epoch
    seconds; None when the file is missing or holds no readable certificate."""
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(Path(pem).read_bytes())
    except (OSError, ValueError):
        return None
    return cert.not_valid_after_utc.timestamp()
