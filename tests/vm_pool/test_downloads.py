"""Task-file downloads (design §6): the platform fetches http(s) only, never from loopback,
private, link-local or metadata addresses, within a size and a time limit, and keeps each file
by URL so that it is fetched once; managers may upload the file for a URL instead.

Servers here are real: HTTP (and HTTPS) servers on 127.0.0.1, listed as a deployment's mirror
where a test needs them reached. Refusals are shown to open no connection at all.
"""

import hashlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile

from backend.accounts.roles import Role
from tests.support.certificates import self_signed
from vm_pool.models import TaskFile
from vm_pool.task_files.downloads import (
    DownloadRefused,
    fetch_task_file,
    size_limit_text,
    store_task_file,
    task_file_path,
)

pytestmark = pytest.mark.django_db

DOCUMENT = b"The quarterly report, as the task expects it.\n"
NEVER = "downloads never reach loopback, private, link-local or metadata addresses"

Route = Callable[[BaseHTTPRequestHandler], None]


class FileServer:
    """A real HTTP(S) server on 127.0.0.1 that answers scripted routes and records requests."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = {"/report.txt": lambda h: send(h, 200, DOCUMENT)}
        self.requests: list[tuple[str, str | None]] = []  # (path, Host header)
        self.release = threading.Event()  # ends stalling routes when the test is over
        files = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                files.requests.append((self.path, self.headers.get("Host")))
                files.routes.get(self.path, lambda h: send(h, 404, b"no such file"))(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # clients that give up mid-answer are what several tests are about

        self.httpd = Server(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def url(self, path: str, host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.port}{path}"

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes = b"", **headers: str) -> None:
    handler.send_response(status)
    handler.send_header("Content-Length", str(len(body)))
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def redirect_to(url: str) -> Route:
    return lambda handler: send(handler, 302, Location=url)


class ConnectionRecorder:
    """A listening socket on 127.0.0.1 that counts the connections it receives."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.listener.close()


class FakeDns:
    """Answers chosen names with chosen addresses and records their lookups; other names
    resolve for real."""

    def __init__(self) -> None:
        self.answers: dict[str, list[str]] = {}
        self.lookups: list[str] = []
        self.real = socket.getaddrinfo

    def getaddrinfo(self, host: str, port: int, *args: object, **kwargs: object) -> list:
        if host not in self.answers:
            return self.real(host, port, *args, **kwargs)
        self.lookups.append(host)
        return [self.real(address, port, *args, **kwargs)[0] for address in self.answers[host]]


@pytest.fixture(autouse=True)
def media(settings, tmp_path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TANDEM_DOWNLOAD_ALLOWED_HOSTS = []
    return settings.MEDIA_ROOT


@pytest.fixture
def file_server(settings) -> Iterator[FileServer]:
    """A file server listed as the deployment's mirror."""
    server = FileServer()
    settings.TANDEM_DOWNLOAD_ALLOWED_HOSTS = [f"127.0.0.1:{server.port}"]
    yield server
    server.stop()


@pytest.fixture
def recorder() -> Iterator[ConnectionRecorder]:
    recorder = ConnectionRecorder()
    yield recorder
    recorder.stop()


@pytest.fixture
def connections(monkeypatch) -> list[tuple[str, int]]:
    """Every outgoing TCP connection opened during the test, in order."""
    made: list[tuple[str, int]] = []
    real = socket.create_connection

    def recording(address: tuple[str, int], *args: object, **kwargs: object) -> socket.socket:
        made.append(address)
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recording)
    return made


@pytest.fixture
def dns(monkeypatch) -> FakeDns:
    fake = FakeDns()
    monkeypatch.setattr(socket, "getaddrinfo", fake.getaddrinfo)
    return fake


def refusal(url: str) -> str:
    with pytest.raises(DownloadRefused) as refused:
        fetch_task_file(url)
    assert refused.value.status_code == 422
    assert refused.value.code == "download_refused"
    return refused.value.message


def stored_files(media: Path) -> list[str]:
    folder = media / "task-files"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# Rules on the URL and on the addresses it leads to


@pytest.mark.parametrize(
    ("url", "scheme"),
    [("file:///etc/shadow", "file"), ("data:text/plain,secret", "data"), ("ftp://x.org/f", "ftp")],
)
def test_only_http_and_https_urls_are_fetched(url, scheme, connections):
    assert refusal(url) == f"only http and https URLs are fetched, not {scheme!r}"
    assert connections == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:{port}/", "127.0.0.1 is a loopback address"),
        ("http://[::1]:{port}/", "::1 is a loopback address"),
        ("http://localhost:{port}/", "is a loopback address"),
        (
            "http://[::ffff:127.0.0.1]:{port}/",
            "::ffff:7f00:1 (IPv4 127.0.0.1) is a loopback address",
        ),
        ("http://2130706433:{port}/", "127.0.0.1 is a loopback address"),
        ("http://0.0.0.0:{port}/", "0.0.0.0 is an unspecified address"),
        ("http://10.1.2.3/", "10.1.2.3 is a private address"),
        ("http://192.168.1.20/", "192.168.1.20 is a private address"),
        ("http://[fd12::1]/", "fd12::1 is a private address"),
        ("http://100.64.0.7/", "100.64.0.7 is a shared (CGNAT) address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a metadata address"),
        ("http://[fd00:ec2::254]/", "fd00:ec2::254 is a metadata address"),
        ("http://169.254.3.4/", "169.254.3.4 is a link-local address"),
        ("http://[fe80::1]/", "fe80::1 is a link-local address"),
        ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
    ],
)
def test_addresses_that_are_not_globally_routable_are_refused_without_connecting(
    url, message, recorder, connections
):
    refused = refusal(url.format(port=recorder.port))
    assert message in refused
    assert refused.endswith(NEVER)
    assert connections == []
    assert recorder.accepted == 0
    assert TaskFile.objects.count() == 0


def test_a_name_is_refused_when_any_of_its_addresses_is_private(dns, connections):
    dns.answers["files.example.org"] = ["93.184.215.14", "10.0.0.5"]
    assert "10.0.0.5 is a private address" in refusal("http://files.example.org/report.txt")
    assert connections == []


def test_a_local_server_that_is_not_listed_is_refused(recorder, connections, settings):
    settings.TANDEM_DOWNLOAD_ALLOWED_HOSTS = [f"127.0.0.1:{recorder.port + 1}"]  # another port
    assert "127.0.0.1 is a loopback address" in refusal(f"http://127.0.0.1:{recorder.port}/")
    assert recorder.accepted == 0
    assert connections == []


@pytest.mark.parametrize("host", ["169.254.169.254", "[fd00:ec2::254]"])
def test_metadata_addresses_stay_refused_even_when_listed(host, settings, connections):
    settings.TANDEM_DOWNLOAD_ALLOWED_HOSTS = [f"{host}:80"]
    assert "is a metadata address" in refusal(f"http://{host}/latest/meta-data/")
    assert connections == []


# The listed mirror: fetching, the cache, the connection itself


def test_a_listed_server_serves_the_file_once_and_the_cache_answers_after(file_server, media):
    url = file_server.url("/report.txt")

    assert fetch_task_file(url) == DOCUMENT
    assert fetch_task_file(url) == DOCUMENT

    assert file_server.requests == [("/report.txt", f"127.0.0.1:{file_server.port}")]
    kept = TaskFile.objects.get()
    assert (kept.url, kept.source, kept.size_bytes) == (url, "fetched", len(DOCUMENT))
    assert stored_files(media) == [kept.sha256]
    assert default_storage.open(task_file_path(kept.sha256)).read() == DOCUMENT


def test_a_task_that_names_its_files_sha256_gets_that_content_or_an_error(file_server, media):
    digest = hashlib.sha256(DOCUMENT).hexdigest()
    other_url = file_server.url("/elsewhere/report.txt")
    store_task_file(other_url, DOCUMENT, TaskFile.Source.UPLOADED)
    # Kept under another URL, the same content serves: no request is made.
    assert fetch_task_file(file_server.url("/report.txt"), digest) == DOCUMENT
    assert file_server.requests == []
    # A file whose content is not the one named is refused, kept or fetched, and nothing kept.
    with pytest.raises(DownloadRefused, match="has sha256 .*, not the task's 0+$"):
        fetch_task_file(other_url, "0" * 64)
    with pytest.raises(DownloadRefused, match=r"report.txt has sha256 .*, not 1+$"):
        fetch_task_file(file_server.url("/report.txt"), "1" * 64)
    assert TaskFile.objects.count() == 1


def test_proxy_variables_of_the_environment_are_ignored(file_server, recorder, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{recorder.port}")

    assert fetch_task_file(file_server.url("/report.txt")) == DOCUMENT
    assert recorder.accepted == 0


def test_the_connection_goes_to_the_address_that_was_checked(
    file_server, dns, connections, settings
):
    """One lookup, checked, then connected to: a second lookup could answer differently."""
    dns.answers["mirror.internal"] = ["127.0.0.1"]
    settings.TANDEM_DOWNLOAD_ALLOWED_HOSTS = [f"mirror.internal:{file_server.port}"]

    assert fetch_task_file(f"http://mirror.internal:{file_server.port}/report.txt") == DOCUMENT

    assert dns.lookups == ["mirror.internal"]
    assert connections == [("127.0.0.1", file_server.port)]
    assert file_server.requests == [("/report.txt", f"mirror.internal:{file_server.port}")]


def test_a_redirect_on_the_listed_server_is_followed(file_server):
    file_server.routes["/old"] = redirect_to("/report.txt")
    assert fetch_task_file(file_server.url("/old")) == DOCUMENT
    assert [path for path, _ in file_server.requests] == ["/old", "/report.txt"]
    assert TaskFile.objects.get().url == file_server.url("/old")


def test_a_redirect_to_an_unlisted_local_port_is_refused(file_server, recorder):
    target = f"http://127.0.0.1:{recorder.port}/x"
    file_server.routes["/away"] = redirect_to(target)

    message = refusal(file_server.url("/away"))

    assert message == f"redirected to {target}: 127.0.0.1 is a loopback address: {NEVER}"
    assert recorder.accepted == 0
    assert TaskFile.objects.count() == 0


def test_a_redirect_to_the_metadata_address_is_refused(file_server, connections, media):
    target = "http://169.254.169.254/latest/meta-data/iam/"
    file_server.routes["/creds"] = redirect_to(target)

    message = refusal(file_server.url("/creds"))

    assert message.startswith(f"redirected to {target}: 169.254.169.254 is a metadata address")
    assert connections == [("127.0.0.1", file_server.port)]
    assert TaskFile.objects.count() == 0
    assert stored_files(media) == []


def test_a_redirect_to_a_file_url_is_refused(file_server):
    file_server.routes["/local"] = redirect_to("file:///etc/passwd")
    assert refusal(file_server.url("/local")) == (
        "redirected to file:///etc/passwd: only http and https URLs are fetched, not 'file'"
    )


def test_more_than_five_redirects_are_refused(file_server):
    file_server.routes["/loop"] = redirect_to("/loop")
    assert refusal(file_server.url("/loop")) == "too many redirects (more than 5)"
    assert len(file_server.requests) == 6
    assert TaskFile.objects.count() == 0


def test_an_error_answer_is_refused_with_its_status(file_server):
    assert refusal(file_server.url("/missing.txt")) == "the server answered 404 Not Found"
    assert TaskFile.objects.count() == 0


# Size and time limits


def test_a_declared_length_over_the_limit_is_refused_before_reading(file_server, settings, media):
    settings.TANDEM_DOWNLOAD_MAX_BYTES = 1000
    file_server.routes["/big"] = lambda h: send(h, 200, b"x" * 5000)

    assert refusal(file_server.url("/big")) == "larger than the 1000 bytes download limit"
    assert TaskFile.objects.count() == 0
    assert stored_files(media) == []


def test_a_chunked_body_over_the_limit_is_refused_while_reading(file_server, settings, media):
    settings.TANDEM_DOWNLOAD_MAX_BYTES = 1000

    def chunked(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for _ in range(10):
            handler.wfile.write(b"1f4\r\n" + b"x" * 500 + b"\r\n")
        handler.wfile.write(b"0\r\n\r\n")

    file_server.routes["/chunked"] = chunked

    assert refusal(file_server.url("/chunked")) == "larger than the 1000 bytes download limit"
    assert TaskFile.objects.count() == 0
    assert stored_files(media) == []


def test_the_limit_is_named_in_megabytes():
    assert size_limit_text(100 * 1024 * 1024) == "larger than the 100 MB download limit"


def test_a_server_that_stalls_is_given_up_at_the_time_limit(file_server, settings):
    settings.TANDEM_DOWNLOAD_TIMEOUT_SECONDS = 1
    file_server.routes["/stall"] = lambda h: file_server.release.wait(10)

    started = time.monotonic()
    assert refusal(file_server.url("/stall")) == "timed out after 1 s"
    assert time.monotonic() - started < 3
    assert TaskFile.objects.count() == 0


def test_a_server_that_trickles_bytes_is_cut_off_at_the_time_limit(file_server, settings):
    """Each byte comes before a socket timeout would fire; the whole download still may not
    take longer than the limit."""
    settings.TANDEM_DOWNLOAD_TIMEOUT_SECONDS = 1

    def trickle(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100")
        handler.end_headers()
        for _ in range(100):
            if file_server.release.wait(0.2):
                return
            handler.wfile.write(b"x")
            handler.wfile.flush()

    file_server.routes["/trickle"] = trickle

    started = time.monotonic()
    assert refusal(file_server.url("/trickle")) == "timed out after 1 s"
    assert time.monotonic() - started < 3
    assert TaskFile.objects.count() == 0


def test_a_body_cut_short_is_refused(file_server):
    def short(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(b"x" * 40)
        handler.close_connection = True

    file_server.routes["/short"] = short
    assert refusal(file_server.url("/short")) == "the connection closed after 40 of 100 bytes"
    assert TaskFile.objects.count() == 0


# HTTPS: the certificate is checked against the name in the URL, not the address


def certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for ``name`` and its key, as PEM files."""
    cert, key = self_signed([name])
    cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
    cert_path.write_bytes(cert)
    key_path.write_bytes(key)
    return cert_path, key_path


@pytest.fixture
def tls_server(tmp_path, settings, dns, monkeypatch) -> Iterator[tuple[FileServer, list[str]]]:
    """An HTTPS mirror at files.test (127.0.0.1) whose certificate is trusted, and the server
    names (SNI) its clients asked for."""
    cert, key = certificate(tmp_path, "files.test")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client's trust store
    server_names: list[str] = []
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    tls.sni_callback = lambda sock, name, context: server_names.append(name)
    server = FileServer(tls)
    dns.answers["files.test"] = ["127.0.0.1"]
    settings.TANDEM_DOWNLOAD_ALLOWED_HOSTS = [f"files.test:{server.port}"]
    yield server, server_names
    server.stop()


def test_https_verifies_the_certificate_against_the_urls_name(tls_server, connections):
    server, server_names = tls_server

    assert fetch_task_file(server.url("/report.txt", "files.test", "https")) == DOCUMENT

    assert server_names == ["files.test"]
    assert connections == [("127.0.0.1", server.port)]
    assert server.requests == [("/report.txt", f"files.test:{server.port}")]


def test_https_refuses_a_certificate_for_another_name(tls_server, dns, settings):
    server, _ = tls_server
    dns.answers["other.test"] = ["127.0.0.1"]
    settings.TANDEM_DOWNLOAD_ALLOWED_HOSTS = [f"other.test:{server.port}"]

    message = refusal(server.url("/report.txt", "other.test", "https"))

    assert message.startswith("the download failed:")
    assert "certificate verify failed" in message.lower()
    assert server.requests == []
    assert TaskFile.objects.count() == 0


# Uploads through the API


@pytest.fixture
def people(make_user, project) -> dict[str, object]:
    return {
        "annotator": make_user("annotator", project, Role.ANNOTATOR),
        "reviewer": make_user("reviewer", project, Role.REVIEWER),
        "engineer": make_user("engineer", project, Role.ENGINEER),
        "manager": make_user("manager", project, Role.MANAGER),
        "project_creator": make_user("creator", can_create_projects=True),
        "admin": make_user("admin", is_superuser=True, is_staff=True),
    }


def upload(client, url: str, content: bytes, name: str = "report.txt"):
    return client.post(
        "/api/task-files/",
        {"url": url, "file": SimpleUploadedFile(name, content)},
        format="multipart",
    )


def snapshot(media: Path) -> tuple[list[tuple], list[str]]:
    rows = list(TaskFile.objects.order_by("id").values_list("url", "sha256", "source"))
    return rows, stored_files(media)


OFFLINE_URL = "https://files.example.org/osworld/report.docx"


def test_an_uploaded_file_is_returned_without_any_network(
    people, client_for, dns, connections, media
):
    response = upload(client_for(people["manager"]), OFFLINE_URL, DOCUMENT)
    assert response.status_code == 201, response.json()
    assert response.json()["uploaded_by"] == "manager"
    assert response.json()["source"] == "uploaded"

    assert fetch_task_file(OFFLINE_URL) == DOCUMENT

    assert dns.lookups == []
    assert connections == []
    assert stored_files(media) == [response.json()["sha256"]]


def test_a_new_upload_for_a_url_replaces_the_old_one(people, client_for, media):
    client = client_for(people["admin"])
    first = upload(client, OFFLINE_URL, b"first version").json()
    second = upload(client, OFFLINE_URL, b"second version").json()

    assert TaskFile.objects.get().sha256 == second["sha256"]
    assert stored_files(media) == [second["sha256"]]  # the old content is no longer kept
    assert first["sha256"] != second["sha256"]
    assert fetch_task_file(OFFLINE_URL) == b"second version"


def test_the_list_shows_the_kept_files_and_filters_by_url(people, client_for):
    client = client_for(people["project_creator"])
    upload(client, OFFLINE_URL, DOCUMENT)
    upload(client, "https://files.example.org/other.xlsx", b"sheet")

    everything = client.get("/api/task-files/").json()
    one = client.get("/api/task-files/", {"url": OFFLINE_URL}).json()

    assert everything["count"] == 2
    assert [f["url"] for f in one["results"]] == [OFFLINE_URL]
    assert set(one["results"][0]) == {
        "id",
        "url",
        "sha256",
        "size_bytes",
        "source",
        "uploaded_by",
        "created_at",
    }


def test_deleting_a_file_forgets_it_and_its_content(people, client_for, media):
    client = client_for(people["manager"])
    kept = upload(client, OFFLINE_URL, DOCUMENT).json()

    assert client.delete(f"/api/task-files/{kept['id']}/").status_code == 204

    assert snapshot(media) == ([], [])


def test_content_shared_by_two_urls_stays_until_neither_needs_it(people, client_for, media):
    client = client_for(people["manager"])
    first = upload(client, OFFLINE_URL, DOCUMENT).json()
    upload(client, "https://mirror.example.org/report.docx", DOCUMENT)

    client.delete(f"/api/task-files/{first['id']}/")

    assert stored_files(media) == [first["sha256"]]
    assert fetch_task_file("https://mirror.example.org/report.docx") == DOCUMENT


@pytest.mark.parametrize("role", ["annotator", "reviewer", "engineer"])
def test_only_managers_and_admins_may_manage_task_files(role, people, client_for, media):
    kept = upload(client_for(people["manager"]), OFFLINE_URL, DOCUMENT).json()
    before = snapshot(media)
    client = client_for(people[role])

    assert upload(client, OFFLINE_URL, b"something else").status_code == 403
    assert upload(client, "https://files.example.org/new.txt", b"new").status_code == 403
    assert client.delete(f"/api/task-files/{kept['id']}/").status_code == 403
    assert client.get("/api/task-files/").status_code == 403

    assert snapshot(media) == before


def test_anonymous_callers_get_nothing(people, client_for):
    assert client_for(None).get("/api/task-files/").status_code == 401
    assert upload(client_for(None), OFFLINE_URL, DOCUMENT).status_code == 401
    assert TaskFile.objects.count() == 0


def test_a_token_needs_the_tasks_write_scope_to_upload(people, token_client_for, media):
    reader, _ = token_client_for(people["manager"], ["tasks:read"])
    writer, _ = token_client_for(people["manager"], ["tasks:write"])

    assert reader.get("/api/task-files/").status_code == 200
    assert upload(reader, OFFLINE_URL, DOCUMENT).status_code == 403
    assert snapshot(media) == ([], [])
    assert upload(writer, OFFLINE_URL, DOCUMENT).status_code == 201


@pytest.mark.parametrize(
    "url", ["file:///etc/shadow", "ftp://files.example.org/report.docx", "report.docx", ""]
)
def test_an_upload_for_a_url_that_is_not_http_is_rejected(url, people, client_for, media):
    response = upload(client_for(people["manager"]), url, DOCUMENT)

    assert response.status_code == 400
    assert "url" in response.json()["error"]["details"]
    assert snapshot(media) == ([], [])


def test_an_upload_without_a_file_is_rejected(people, client_for, media):
    response = client_for(people["manager"]).post(
        "/api/task-files/", {"url": OFFLINE_URL}, format="multipart"
    )

    assert response.status_code == 400
    assert "file" in response.json()["error"]["details"]
    assert snapshot(media) == ([], [])


@pytest.mark.parametrize("size", [2000, 200_000])  # under and over the multipart allowance
def test_an_upload_over_the_download_limit_is_rejected(size, people, client_for, media, settings):
    settings.TANDEM_DOWNLOAD_MAX_BYTES = 1000
    client = client_for(people["manager"])
    upload(client, OFFLINE_URL, b"small")
    before = snapshot(media)

    response = upload(client, OFFLINE_URL, b"x" * size)

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert "1000 bytes download limit" in response.json()["error"]["message"]
    assert snapshot(media) == before
