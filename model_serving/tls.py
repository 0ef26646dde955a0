"""The TLS context model calls verify servers with, made once per process.

httpx makes a context for every client it opens unless it is given one, loading the whole CA
bundle each time: 30–50 ms of CPU, once per proposal and per judge call. The context is the
one httpx would make (its CA bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), shared: an
``SSLContext`` may serve many connections and threads at once.
"""

import functools
import ssl

import httpx


@functools.cache
def trusted() -> ssl.SSLContext:
    return httpx.create_ssl_context()
