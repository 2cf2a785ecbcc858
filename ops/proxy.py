"""HAProxy in front of Parley's processes, as production runs it: TLS with a certificate from a
local certificate authority made at first start, and the configuration of the production recipe,
``ops/deploy/haproxy.cfg``, used as it is (its settings come from the environment).

``Proxy(folder, processes).start()`` runs Debian's HAProxy on loopback; ``url`` is the one https
address to use and ``ca_file`` the authority a client must trust. ``state()`` asks HAProxy's admin
socket which processes it sends work to, so that a deploy (ops.cluster) waits until the proxy has
seen a new process ready before draining the old one.
"""

import datetime
import ipaddress
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from ops.servers import free_port, stop_process, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "ops" / "deploy" / "haproxy.cfg"
ENVIRONMENT = ROOT / "ops" / "deploy" / "haproxy.env"
BACKEND = "parley_processes"
SLOTS = 4  # PARLEY_PROCESS_1..4 in the configuration
UNUSED = "127.0.0.1:1"  # a slot with no process: always down, never sent anything
HOST = "localhost"  # the name the certificate is for, and the health checks' Host


def _haproxy() -> str:
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not os.access(binary, os.X_OK):
        raise RuntimeError("HAProxy is not installed: apt-get install haproxy (make test does)")
    return binary


def make_certificates(folder: Path) -> tuple[Path, Path]:
    """A certificate authority and a certificate it signs for ``localhost`` and 127.0.0.1, made
    once in ``folder`` and kept (a client that trusts the authority keeps trusting it). Returns
    the authority's certificate (for clients) and the server's certificate, chain and key in one
    file (for HAProxy)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(parents=True, exist_ok=True)
    ca_file, pem_file = folder / "ca.pem", folder / "server.pem"
    if ca_file.exists() and pem_file.exists():
        return ca_file, pem_file
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Parley local CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=397))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(HOST), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pem_file.touch(mode=0o600)
    pem_file.write_bytes(cert.public_bytes(pem) + ca.public_bytes(pem) + key_pem)
    ca_file.write_bytes(ca.public_bytes(pem))
    return ca_file, pem_file


class Proxy:
    """Debian's HAProxy running ``ops/deploy/haproxy.cfg`` in front of up to four processes
    (``host:port``), on 127.0.0.1: https on ``port``, plain http (redirected) on ``http_port``."""

    def __init__(
        self,
        folder: Path,
        processes: list[str],
        port: int | None = None,
        http_port: int | None = None,
    ):
        if len(processes) > SLOTS:
            raise ValueError(f"the configuration has {SLOTS} process slots")
        self.folder = Path(folder)
        self.processes = list(processes)
        self.port = port or free_port()
        self.http_port = http_port or free_port()
        self.admin_socket = self.folder / "admin.sock"
        self.log_path = self.folder / "haproxy.log"
        self.ca_file, self.pem_file = make_certificates(self.folder / "tls")
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"wss://{HOST}:{self.port}"

    def _global_config(self) -> Path:
        """The stand-in for Debian's haproxy.cfg ``global`` section: logs to stdout (the file
        above) and the admin socket, in this proxy's folder."""
        path = self.folder / "global.cfg"
        path.write_text(
            "global\n"
            "    log stdout format raw local0 info\n"
            f'    stats socket "{self.admin_socket}" mode 600 level admin\n'
            "    hard-stop-after 30s\n"
        )
        return path

    def environment(self) -> dict:
        """The configuration's environment (the names of ``ops/deploy/haproxy.env``, which the
        README gives operators), with this proxy's values."""
        slots = [*self.processes, *[UNUSED] * (SLOTS - len(self.processes))]
        found = {
            "PARLEY_PROXY_BIND": f"127.0.0.1:{self.port}",
            "PARLEY_PROXY_HTTP_BIND": f"127.0.0.1:{self.http_port}",
            "PARLEY_TLS_PEM": str(self.pem_file),
            "PARLEY_READY_HOST": HOST,
            **{f"PARLEY_PROCESS_{number}": slot for number, slot in enumerate(slots, 1)},
        }
        names = [
            line.split("=", 1)[0]
            for line in ENVIRONMENT.read_text().splitlines()
            if line and not line.startswith("#")
        ]
        if sorted(names) != sorted(found):
            raise RuntimeError(f"{ENVIRONMENT} names {names}, not {sorted(found)}")
        return found

    def start(self, timeout: float = 30) -> "Proxy":
        self.folder.mkdir(parents=True, exist_ok=True)
        command = [_haproxy(), "-W", "-db", "-f", str(self._global_config()), "-f", str(CONFIG)]
        check = subprocess.run(
            [*command, "-c", "-q"],
            env={**os.environ, **self.environment()},
            capture_output=True,
            text=True,
        )
        if check.returncode != 0:
            raise RuntimeError(f"HAProxy refused its configuration:\n{check.stderr}")
        log = open(self.log_path, "a")
        self.process = subprocess.Popen(
            command,
            env={**os.environ, **self.environment()},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        wait_for_port(self.port, timeout, "HAProxy", alive=lambda: self.process.poll() is None)
        return self

    def stop(self) -> None:
        stop_process(self.process, timeout=15)
        self.process = None

    def admin(self, command: str) -> str:
        """One command on HAProxy's admin socket (``show stat``, ``show servers state``...)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(self.admin_socket))
            sock.sendall(command.encode() + b"\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def _servers(self) -> list[dict]:
        lines = self.admin("show stat").splitlines()
        header = lines[0].lstrip("# ").split(",")
        rows = (dict(zip(header, line.split(","), strict=False)) for line in lines[1:])
        return [
            row
            for row in rows
            if row.get("pxname") == BACKEND and row.get("svname", "").startswith("process")
        ]

    def state(self) -> dict[str, str]:
        """Each process (``host:port``) with what the proxy makes of it: ``UP``, ``DOWN``,
        ``DRAIN`` (sent nothing new), or a transition (``UP 1/2``: failed one check of two)."""
        return {row["addr"]: row["status"] for row in self._servers()}

    def set_state(self, address: str, state: str) -> None:
        """Tell the proxy to send the process at ``address`` nothing new (``drain``), or work
        again once its checks pass (``ready``), as an operator does on the admin socket."""
        (name,) = [row["svname"] for row in self._servers() if row["addr"] == address]
        answer = self.admin(f"set server {BACKEND}/{name} state {state}").strip()
        if answer:
            raise RuntimeError(f"HAProxy refused to set {address} {state}: {answer}")

    def wait_for(self, address: str, status: str, timeout: float = 60) -> None:
        """Until the proxy sees the process at ``address`` as ``status`` (``UP``, ``DOWN``)."""
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = self.state().get(address)
            if seen == status:
                return
            time.sleep(0.1)
        raise TimeoutError(f"HAProxy still sees {address} as {seen!r}, not {status!r}")

    def log_text(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""
