"""Where Parley may send requests that people choose the address of (a webhook's URL): public
addresses only, unless the operator lets private ones be reached. The name is resolved once,
checked, and the request sent to the address checked (the certificate still checked against the
name), so that a name that resolves elsewhere a moment later (DNS rebinding) cannot lead a
request inside the network: to a cloud's metadata service, a database, Parley itself."""

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings


class Refused(Exception):
    """An address Parley will not send to, and why (in words for the person who chose it)."""


def is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_global and not ip.is_multicast


def check_literal(host: str) -> None:
    """Refuse a host written as an address that is not public (no look-up: names are checked
    when something is sent). Raises :class:`Refused`."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return  # a name
    if not settings.PARLEY_WEBHOOK_PRIVATE_ADDRESSES and not is_public(host.strip("[]")):
        raise Refused(f"{host} is not a public address.")


@dataclass(frozen=True)
class Pinned:
    """A request's URL with its host replaced by the address checked, and what keeps the
    request what it was: the Host header, and the name TLS checks the certificate against."""

    url: str
    headers: dict
    extensions: dict


def pinned(url: str) -> Pinned:
    """Resolve ``url``'s host once and check every address it has. Raises :class:`Refused`
    for a name that does not resolve, or that resolves to an address that is not public."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise Refused(f"{host} does not resolve.") from None
    addresses = [info[4][0] for info in found]
    if not settings.PARLEY_WEBHOOK_PRIVATE_ADDRESSES:
        private = [address for address in addresses if not is_public(address)]
        if private:
            raise Refused(f"{host} resolves to {private[0]}, which is not a public address.")
    address = addresses[0]
    shown = f"[{address}]" if ":" in address else address
    netloc = f"{shown}:{parts.port}" if parts.port else shown
    named = f"[{host}]" if ":" in host else host
    host_header = f"{named}:{parts.port}" if parts.port else named
    return Pinned(
        url=parts._replace(netloc=netloc).geturl(),
        headers={"Host": host_header},
        extensions={"sni_hostname": host} if parts.scheme == "https" else {},
    )
