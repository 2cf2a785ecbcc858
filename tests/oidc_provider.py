"""A real OpenID provider on loopback for the single sign-on tests: panva's oidc-provider
(tests/clients/oidc-provider.mjs) run by Node as a subprocess, on a socket bound here first,
so its issuer is known before the Parley it serves starts (and stays the same across a
restart). Its accounts are a JSON file that a test rewrites to change what it says of people."""

import json
import socket
import subprocess
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "tests" / "clients" / "oidc-provider.mjs"
CLIENT_ID = "parley"
CLIENT_SECRET = "parley-secret"


class OidcProvider:
    def __init__(self, tmp_path: Path, accounts: dict, *, host: str = "127.0.0.1"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        # ``host`` other than the address changes only what the issuer is called.
        self.issuer = f"http://{host}:{self.port}"
        self.accounts_path = tmp_path / "oidc-accounts.json"
        self.log_path = tmp_path / "oidc-provider.log"
        self.set_accounts(accounts)
        self.process = None
        self.redirect_uri = ""

    def settings(self, **more) -> dict:
        """Parley's environment for this provider."""
        return {
            "PARLEY_OIDC_ISSUER": self.issuer,
            "PARLEY_OIDC_CLIENT_ID": CLIENT_ID,
            "PARLEY_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "PARLEY_OIDC_NAME": "Test ID",
            **more,
        }

    def set_accounts(self, accounts: dict) -> None:
        self.accounts_path.write_text(json.dumps(accounts))

    def start(self, redirect_uri: str | None = None, timeout: float = 20) -> None:
        self.redirect_uri = redirect_uri or self.redirect_uri
        log = open(self.log_path, "a")
        self.process = subprocess.Popen(
            [
                "node",
                str(SCRIPT),
                "--fd",
                str(self.sock.fileno()),
                "--issuer",
                self.issuer,
                "--redirect-uri",
                self.redirect_uri,
                "--accounts",
                str(self.accounts_path),
            ],
            cwd=ROOT / "tests" / "clients",
            pass_fds=[self.sock.fileno()],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        log.close()
        # The first line says it listens (or the process ended: its log says why).
        line = _read_line(self.process, timeout)
        if '"listening"' not in line:
            self.stop()
            raise RuntimeError(f"oidc-provider did not start:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self.process is not None and self.process.stdout:
            self.process.stdout.close()
        self.process = None

    def restart(self) -> None:
        """A new provider on the same socket: its sessions and grants are gone."""
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        self.sock.close()


def _read_line(process: subprocess.Popen, timeout: float) -> str:
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline()
