"""Files a task's setup downloads: fetched by the platform under rules, and kept by URL.

Task files are written by others, and the fetch runs on a Celery worker inside the platform's
network, so a URL must never become a way to read what only the platform can reach (its
database, its cloud's metadata service, ``file:///etc/shadow``). The rules:

- only ``http`` and ``https`` URLs; no proxy is taken from the environment;
- the host name is resolved once, and every address it resolves to must be globally routable:
  never loopback, private, link-local (where cloud metadata lives), shared (CGNAT), multicast,
  reserved or unspecified, nor such an IPv4 address written inside an IPv6 one;
- the connection goes to an address checked above, never to a second lookup's answer (which
  could differ: DNS rebinding), with the original Host header and, for https, the certificate
  checked against the original name;
- redirects are followed by hand, at most ``MAX_REDIRECTS``, each new URL under the same rules;
- at most ``TANDEM_DOWNLOAD_MAX_BYTES``, declared or read, and the whole download, redirects
  included, within ``TANDEM_DOWNLOAD_TIMEOUT_SECONDS``;
- only a 2xx answer is a file.

``TANDEM_DOWNLOAD_ALLOWED_HOSTS`` lists the ``host:port`` of a deployment's own file mirror:
those may resolve to loopback, private or shared addresses. Metadata and every other
link-local address stay refused.

A file is kept (``TaskFile``) under its URL once fetched, so a task's files are fetched once; a
manager may upload the file for a URL instead, for platforms with no way out to the internet.
"""

import contextlib
import hashlib
import http.client
import ipaddress
import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote, urljoin, urlsplit

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from backend.accounts.models import User
from backend.errors import DomainError
from vm_pool.models import TaskFile

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
DEFAULT_PORTS = {"http": 80, "https": 443}
CHUNK_BYTES = 64 * 1024
USER_AGENT = "Tandem task-file fetcher"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Cloud metadata services (AWS, and the IPv6 one of AWS Nitro instances).
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
SHARED_NETWORK = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT, RFC 6598
NAT64_NETWORK = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the low 32 bits are IPv4

LOOPBACK = "a loopback address"
PRIVATE = "a private address"
SHARED = "a shared (CGNAT) address"
# What a listed mirror may resolve to.
MIRROR_KINDS = frozenset({LOOPBACK, PRIVATE, SHARED})
NEVER = "downloads never reach loopback, private, link-local or metadata addresses"


class DownloadRefused(DomainError):
    """A task file that cannot be had; the message names the rule or the failure."""

    status_code = 422
    code = "download_refused"


@dataclass(frozen=True)
class _Location:
    scheme: str
    host: str
    port: int
    target: str  # path and query, as sent in the request line


def check_url(url: str) -> None:
    """Raise DownloadRefused unless ``url`` is one a download may start from (its form only)."""
    _split(url)


def fetch_task_file(url: str, sha256: str | None = None) -> bytes:
    """The file at ``url``: kept from before, else downloaded under the rules and kept.

    With ``sha256`` (a task that names its file's digest), a file kept with that content under
    any URL serves, and a file whose content differs is refused rather than used. Raises
    DownloadRefused, naming the rule or the failure, when the file cannot be had.
    """
    wanted = sha256.lower() if sha256 else None
    kept = TaskFile.objects.filter(url_sha256=url_key(url)).first()
    if kept is None and wanted is not None:
        kept = TaskFile.objects.filter(sha256=wanted).first()
    if kept is not None and (wanted is None or kept.sha256 == wanted):
        with default_storage.open(task_file_path(kept.sha256), "rb") as content:
            return content.read()
    if kept is not None:
        raise DownloadRefused(
            f"the file kept for {url} has sha256 {kept.sha256}, not the task's {wanted}"
        )
    data = _download(url)
    if wanted is not None and hashlib.sha256(data).hexdigest() != wanted:
        raise DownloadRefused(f"{url} has sha256 {hashlib.sha256(data).hexdigest()}, not {wanted}")
    store_task_file(url, data, TaskFile.Source.FETCHED)
    logger.info("fetched task file %s (%d bytes)", url, len(data))
    return data


def store_task_file(
    url: str, data: bytes, source: TaskFile.Source, uploaded_by: User | None = None
) -> TaskFile:
    """Keep ``data`` as the file at ``url``, replacing what was kept for that URL before."""
    digest = hashlib.sha256(data).hexdigest()
    path = task_file_path(digest)
    if not default_storage.exists(path):
        saved = default_storage.save(path, ContentFile(data))
        if saved != path:  # a concurrent writer got there first; keep one copy
            default_storage.delete(saved)
    key = url_key(url)
    with transaction.atomic():
        previous = TaskFile.objects.select_for_update().filter(url_sha256=key).first()
        task_file, _ = TaskFile.objects.update_or_create(
            url_sha256=key,
            defaults={
                "url": url,
                "sha256": digest,
                "size_bytes": len(data),
                "file": path,
                "source": source,
                "uploaded_by": uploaded_by,
                "created_at": timezone.now(),
            },
        )
    if previous is not None and previous.sha256 != digest:
        _drop_content_if_unused(previous.sha256)
    return task_file


def delete_task_file(task_file: TaskFile) -> None:
    """Forget the file kept for a URL; the next setup that needs it downloads it again."""
    task_file.delete()
    _drop_content_if_unused(task_file.sha256)


def url_key(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


def task_file_path(sha256: str) -> str:
    return f"task-files/{sha256}"


def size_limit_text(limit: int) -> str:
    mib = 1024 * 1024
    size = f"{limit // mib} MB" if limit % mib == 0 else f"{limit} bytes"
    return f"larger than the {size} download limit"


def _drop_content_if_unused(sha256: str) -> None:
    # The content is shared by every URL whose file has the same bytes.
    if not TaskFile.objects.filter(sha256=sha256).exists():
        default_storage.delete(task_file_path(sha256))


def _download(url: str) -> bytes:
    deadline = time.monotonic() + settings.TANDEM_DOWNLOAD_TIMEOUT_SECONDS
    current = url
    for hop in range(MAX_REDIRECTS + 1):
        try:
            location = _split(current)
            addresses = _resolve(location)
        except DownloadRefused as refusal:
            if hop == 0:
                raise
            raise DownloadRefused(f"redirected to {current}: {refusal.message}") from None
        redirect, body = _get(location, addresses, deadline)
        if redirect is None:
            return body
        current = urljoin(current, redirect)
    raise DownloadRefused(f"too many redirects (more than {MAX_REDIRECTS})")


def _split(url: str) -> _Location:
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORTS:
        raise DownloadRefused(f"only http and https URLs are fetched, not {parts.scheme!r}")
    if not parts.hostname:
        raise DownloadRefused("the URL names no host")
    try:
        port = parts.port or DEFAULT_PORTS[parts.scheme]
    except ValueError:
        raise DownloadRefused("the URL's port is not a number from 1 to 65535") from None
    # Spaces and non-ASCII characters cannot go into a request line as they are.
    target = quote(parts.path or "/", safe="/%:@!$&'()*+,;=~")
    if parts.query:
        target += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=~?")
    return _Location(parts.scheme, parts.hostname, port, target)


def _resolve(location: _Location) -> list[str]:
    """The addresses to connect to; refused unless every one the name resolves to may be."""
    host_port = f"[{location.host}]" if ":" in location.host else location.host
    mirror = f"{host_port}:{location.port}" in settings.TANDEM_DOWNLOAD_ALLOWED_HOSTS
    try:
        found = socket.getaddrinfo(location.host, location.port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise DownloadRefused(f"{location.host} does not resolve: {exc.strerror}") from None
    addresses: list[str] = []
    for *_, sockaddr in found:
        address = ipaddress.ip_address(sockaddr[0])
        kind = _non_global_kind(address)
        if kind is not None and not (mirror and kind in MIRROR_KINDS):
            raise DownloadRefused(f"{_shown(address)} is {kind}: {NEVER}")
        addresses.append(str(address))
    return list(dict.fromkeys(addresses))


def _non_global_kind(address: IPAddress) -> str | None:
    """What kind of address this is when it is not globally routable, else None."""
    if address in METADATA_ADDRESSES:
        return "a metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return _non_global_kind(embedded)
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return LOOPBACK
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address in SHARED_NETWORK:
        return SHARED
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return PRIVATE
    if not address.is_global:
        return "not a globally routable address"
    return None


def _shown(address: IPAddress) -> str:
    embedded = _embedded_ipv4(address) if isinstance(address, ipaddress.IPv6Address) else None
    return str(address) if embedded is None else f"{address} (IPv4 {embedded})"


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for: IPv4-mapped, IPv4-compatible, 6to4 or NAT64."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    compatible = address.packed[:12] == bytes(12) and int(address) > 1  # not :: nor ::1
    if compatible or address in NAT64_NETWORK:
        return ipaddress.IPv4Address(address.packed[12:])
    return None


def _get(location: _Location, addresses: list[str], deadline: float) -> tuple[str | None, bytes]:
    """One GET: the Location of a redirect, or the body of a 2xx answer."""
    pinned = _PinnedHTTPSConnection if location.scheme == "https" else _PinnedHTTPConnection
    connection = pinned(location, addresses, deadline)
    # A socket timeout bounds each read, not their sum: a server trickling bytes is cut here.
    watchdog = threading.Timer(_remaining(deadline), _cut, (connection,))
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.request("GET", location.target, headers={"User-Agent": USER_AGENT})
        response = connection.getresponse()
        if response.status in REDIRECT_STATUSES:
            redirect = response.getheader("Location")
            if not redirect:
                raise DownloadRefused(f"the server answered {response.status} with no Location")
            return redirect, b""
        if not 200 <= response.status < 300:
            raise DownloadRefused(f"the server answered {response.status} {response.reason}")
        return None, _read_body(response, deadline)
    except (OSError, http.client.HTTPException) as exc:
        if isinstance(exc, TimeoutError) or time.monotonic() >= deadline:
            raise _timed_out() from None
        raise DownloadRefused(f"the download failed: {exc}") from None
    finally:
        watchdog.cancel()
        connection.close()


def _read_body(response: http.client.HTTPResponse, deadline: float) -> bytes:
    limit = settings.TANDEM_DOWNLOAD_MAX_BYTES
    expected = response.length  # from Content-Length; None when chunked or read to the end
    if expected is not None and expected > limit:
        raise DownloadRefused(size_limit_text(limit))
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read1(CHUNK_BYTES):
        size += len(chunk)
        if size > limit:
            raise DownloadRefused(size_limit_text(limit))
        chunks.append(chunk)
    # The watchdog's cut reads like the end of the body.
    if time.monotonic() >= deadline:
        raise _timed_out()
    if expected is not None and size < expected:
        raise DownloadRefused(f"the connection closed after {size} of {expected} bytes")
    return b"".join(chunks)


def _remaining(deadline: float) -> float:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise _timed_out()
    return remaining


def _timed_out() -> DownloadRefused:
    return DownloadRefused(f"timed out after {settings.TANDEM_DOWNLOAD_TIMEOUT_SECONDS} s")


def _cut(connection: http.client.HTTPConnection) -> None:
    """End a download at its deadline, whatever read it is blocked in."""
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            # The plain socket's shutdown, also under TLS: it wakes the blocked read.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _open_socket(addresses: list[str], port: int, deadline: float) -> socket.socket:
    for address in addresses[:-1]:
        with contextlib.suppress(OSError):
            return socket.create_connection((address, port), _remaining(deadline))
    return socket.create_connection((addresses[-1], port), _remaining(deadline))


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """HTTP to addresses checked beforehand, whatever the name resolves to by now."""

    def __init__(self, location: _Location, addresses: list[str], deadline: float) -> None:
        super().__init__(location.host, location.port, timeout=_remaining(deadline))
        self.addresses = addresses
        self.deadline = deadline

    def connect(self) -> None:
        self.sock = _open_socket(self.addresses, self.port, self.deadline)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to addresses checked beforehand; SNI and the certificate check use the name."""

    def __init__(self, location: _Location, addresses: list[str], deadline: float) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(
            location.host, location.port, timeout=_remaining(deadline), context=self.tls
        )
        self.addresses = addresses
        self.deadline = deadline

    def connect(self) -> None:
        plain = _open_socket(self.addresses, self.port, self.deadline)
        self.sock = self.tls.wrap_socket(
            plain, server_hostname=self.host, do_handshake_on_connect=False
        )
        self.sock.do_handshake()  # after self.sock is set, so that the watchdog can cut it
