"""A local certificate authority for HTTPS replay and recording: `labd replay ca OUT_DIR`
writes it once; test devices install `labd-replay-ca.pem`; the server then signs a certificate
for each host it is asked for, on the fly (cached)."""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from labd.errors import UsageError
from labd.replay.errors import ArchiveError

CA_CERT = "labd-replay-ca.pem"
CA_KEY = "labd-replay-ca-key.pem"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def write_ca(directory: Path) -> Path:
    """A new CA (EC P-256, ten years); the key file is readable by its owner only. Never over
    a CA already there: devices that trust it would stop trusting the replay server, and its
    key would be gone (UsageError naming the files)."""
    held = [name for name in (CA_CERT, CA_KEY) if (directory / name).exists()]
    if held:
        raise UsageError(
            f"{directory} holds a CA already ({', '.join(held)}): devices that trust it would "
            "stop trusting the replay server; remove it first to make a new one"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{directory}: cannot make the directory: {e.strerror or e}") from e
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a directory")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("labd replay CA"))
        .issuer_name(_name("labd replay CA"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    cert_path = directory / CA_CERT
    try:
        # O_EXCL: a CA made meanwhile by another run is never overwritten either.
        with os.fdopen(
            os.open(directory / CA_KEY, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb"
        ) as out:
            out.write(pem)
        with cert_path.open("xb") as out:
            out.write(cert.public_bytes(serialization.Encoding.PEM))
    except OSError as e:
        raise UsageError(f"{directory}: cannot write the CA: {e.strerror or e}") from e
    return cert_path


@dataclass
class Authority:
    """Signs host certificates and builds server-side TLS contexts for them."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def load(cls, directory: Path) -> Authority:
        try:
            cert = x509.load_pem_x509_certificate((directory / CA_CERT).read_bytes())
            key = serialization.load_pem_private_key((directory / CA_KEY).read_bytes(), None)
        except (OSError, ValueError) as e:
            raise ArchiveError(
                f"{directory}: no usable labd replay CA ({e}); "
                f"make one with `labd replay ca {directory}`"
            ) from e
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ArchiveError(f"{directory / CA_KEY}: not an EC key written by `labd replay ca`")
        return cls(cert, key)

    def __post_init__(self) -> None:
        self.contexts: dict[str, ssl.SSLContext] = {}
        self.files = tempfile.TemporaryDirectory(prefix="labd-replay-certs-")

    def context(self, host: str) -> ssl.SSLContext:
        """A server context presenting a certificate for `host` (cached per host)."""
        host = host.lower()
        if host not in self.contexts:
            cert_file, key_file = self._issue(host)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert_file, key_file)
            context.set_alpn_protocols(["http/1.1"])
            self.contexts[host] = context
        return self.contexts[host]

    def sni_context(self, default_host: str = "localhost") -> ssl.SSLContext:
        """For direct TLS (origin mode): the certificate follows the client's SNI."""
        context = self.context(default_host)

        def choose(
            sock: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
        ) -> None:
            if server_name:
                sock.context = self.context(server_name)

        context.sni_callback = choose
        return context

    def _issue(self, host: str) -> tuple[str, str]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        try:
            names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(host))]
        except ValueError:
            names = [x509.DNSName(host)]
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(host[:64]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        safe = "".join(c if c.isalnum() or c in ".-" else "_" for c in host)
        cert_path = Path(self.files.name) / f"{safe}.pem"
        key_path = Path(self.files.name) / f"{safe}-key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return str(cert_path), str(key_path)
