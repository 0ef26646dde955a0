"""The settings of a test run: Tandem's own, with each process of a parallel run
(``pytest -n 2``) made an instance of its own before they are read.

pytest-django gives each such process a test database of its own (``test_tandem_gw0``, ...).
What the database does not separate is separated here: the Redis key prefix of the process's
queues and socket groups, the media folder its files go to, and the host name its desktops and
containers are named after (two databases number their desktops from the same 1). The
environment is changed once, in the test process: the programs it starts (workers, servers)
inherit it as it is, or with a host of the test's own, and read Tandem's own settings with it
(a program started from its console script cannot import ``tests``).
"""

import os
import socket
from pathlib import Path

_process = os.environ.get("PYTEST_XDIST_WORKER")
if _process and os.environ.get("TANDEM_TEST_PROCESS") != _process:
    _host = os.environ.get("TANDEM_HOST", socket.gethostname())
    _media = os.environ.get("TANDEM_MEDIA_ROOT", str(Path(__file__).parents[1] / "var" / "media"))
    os.environ["TANDEM_INSTANCE"] = f"test_tandem_{_process}"
    os.environ["TANDEM_HOST"] = f"{_host}-{_process}"
    os.environ["TANDEM_MEDIA_ROOT"] = f"{_media}-{_process}"
    os.environ["TANDEM_TEST_PROCESS"] = _process
os.environ["DJANGO_SETTINGS_MODULE"] = "backend.settings"  # for the programs a test starts

from backend.settings import *  # noqa: E402, F403
