"""The daemons a target names: "h1:9177,h2:9177", "ipv4:"/"ipv6:" lists, or "dns:///name:9177"
(every address the name has). Imports nothing of the package."""

import ipaddress
import socket


def _split_host_port(address):
    if "://" in address:
        raise ValueError(f"'{address}' is a URL; a target is HOST:PORT (e.g. kprofd.lab:9177, "
                         "[::1]:9177)")
    host, sep, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"'{address}' is not HOST:PORT (e.g. kprofd.lab:9177, [::1]:9177)")
    return host, port


def resolve_target(target):
    """The daemons a target names, as "host:port" strings: "h1:9177,h2:9177" (or with an
    "ipv4:"/"ipv6:" prefix) as listed; "dns:///name:9177" as every address the name has."""
    rest = target
    if rest.startswith("dns:"):
        rest = rest[4:]
        if rest.startswith("//"):  # dns://[authority]/host:port
            slash = rest.find("/", 2)
            if slash < 0:
                raise ValueError(f"'{target}' is not dns:///HOST:PORT")
            rest = rest[slash + 1:]
        host, port = _split_host_port(rest)
        try:
            found = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
        except socket.gaierror as error:
            raise ValueError(f"cannot resolve '{host}': {error.strerror}") from None
        if not found:
            raise ValueError(f"'{host}' has no address")
        addresses = []
        for family, _, _, _, sockaddr in found:
            one = f"[{sockaddr[0]}]:{port}" if family == socket.AF_INET6 else \
                f"{sockaddr[0]}:{port}"
            if one not in addresses:
                addresses.append(one)
        return addresses
    for scheme in ("ipv4:", "ipv6:"):
        if rest.startswith(scheme):
            rest = rest[len(scheme):]
    addresses = [part.strip() for part in rest.split(",")]
    for address in addresses:
        host, _ = _split_host_port(address)
        for scheme, kind in (("ipv4:", ipaddress.IPv4Address), ("ipv6:", ipaddress.IPv6Address)):
            if target.startswith(scheme):
                try:
                    kind(host)
                except ValueError:
                    raise ValueError(f"'{address}' in '{target}' is not an {scheme[:4]} "
                                     "address and port") from None
    return addresses


def check_target(target):
    """Refuses a target that names no daemon a client can dial: a bare host (gRPC dialled port
    0), a URL (it asked DNS for "http://..."). A dns: name stays whole."""
    if not target.startswith("dns:"):
        resolve_target(target)
