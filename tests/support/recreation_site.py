"""A stand-in for recreation.gov, served over HTTPS on a desktop, for the one OSWorld task whose
expected side is read live from that site (``getters.recreation``). The desktops have no
internet: the browser is started with ``--host-resolver-rules`` sending recreation.gov to this
server and ``--ignore-certificate-errors`` for its self-signed certificate.

The pages have what the getter looks for on the real site: the home page's search field and
button, a results page at ``/search`` whose highlighted result opens the campground in a new tab
(``target=_blank``), and a campground page whose "next available" button fills the
availability table's column headers (class ``camp-sortable-column-header``).
"""

import ipaddress
import json

from tests.support.certificates import self_signed

PORT = 8443
LOOPBACK = ipaddress.ip_address("127.0.0.1")
FOLDER = "/tmp/recreation"
BROWSER_FLAGS = [
    f"--host-resolver-rules=MAP recreation.gov 127.0.0.1:{PORT}, "
    f"MAP *.recreation.gov 127.0.0.1:{PORT}",
    "--ignore-certificate-errors",
]
# The headers before and after "next available" is pressed: the third is the task's (order 2).
HEADERS_BEFORE = ["Site", "Loop", "Loading…"]
HEADERS_AFTER = ["Site", "Loop", "Sat 12/5"]

HOME = """<!doctype html><title>Recreation.gov</title>
<input id="hero-search-input"><button class="nav-search-button" onclick="
  const query = document.querySelector('#hero-search-input').value;
  location.href = '/search?q=' + encodeURIComponent(query)
">Search</button>"""
SEARCH = """<!doctype html><title>Search</title>
<a class="search-result-highlight--success" href="/camping/campgrounds/232091" target="_blank">
Diamond Lake</a>"""
CAMPGROUND = """<!doctype html><title>Diamond Lake</title>
<script>
const after = %(after)s;
function showNextAvailable() {
  document.querySelectorAll('.camp-sortable-column-header').forEach(
    (header, i) => { header.textContent = after[i]; });
}
</script>
<button class="next-available" onclick="showNextAvailable()">Next available</button>
<table><tr>%(headers)s</tr></table>"""

SERVER = """import http.server, ssl, sys
pages = {"/": "home.html", "/search": "search.html", "/camping/campgrounds/232091": "camp.html"}
class Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        name = pages.get(self.path.split("?")[0])
        body = open(f"%(folder)s/{name}", "rb").read() if name else b"not here"
        self.send_response(200 if name else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
server = http.server.ThreadingHTTPServer(("127.0.0.1", %(port)d), Pages)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("%(folder)s/cert.pem", "%(folder)s/key.pem")
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"""


def files() -> dict[str, bytes]:
    """The server, its pages and a self-signed certificate, by path on the desktop."""
    headers = "".join(f'<th class="camp-sortable-column-header">{h}</th>' for h in HEADERS_BEFORE)
    camp = CAMPGROUND % {"after": json.dumps(HEADERS_AFTER), "headers": headers}
    cert, key = self_signed(
        ["www.recreation.gov", "recreation.gov"], addresses=("127.0.0.1",), days=7
    )
    return {
        f"{FOLDER}/serve.py": (SERVER % {"folder": FOLDER, "port": PORT}).encode(),
        f"{FOLDER}/home.html": HOME.encode(),
        f"{FOLDER}/search.html": SEARCH.encode(),
        f"{FOLDER}/camp.html": camp.encode(),
        f"{FOLDER}/cert.pem": cert,
        f"{FOLDER}/key.pem": key,
    }
