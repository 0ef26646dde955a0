"""The settings of a test run: Tandem's own, as an instance of the tests' own, and each
process of a parallel run (``pytest -n 2``) an instance of its own.

pytest-django gives each such process a test database of its own (``test_tandem_gw0``, ...).
What the database does not separate is separated here, before Tandem's settings are read: the
Redis key prefix of the process's queues and socket groups (``test_tandem``, or
``test_tandem_gw0``, ...: never a deployment's, so that ``tests/conftest.py`` can clear what an
earlier run left under it as the run starts) and the host name its desktops and containers are
named after (two databases number their desktops from the same 1); then the media folder its
files go to (Tandem's, with the instance's name appended: a one-process run's too, never the
folder of a demo on the same checkout). The environment is changed in the test process only:
the programs it starts (workers, servers) inherit it as it is, or with a host of the test's own,
and read Tandem's own settings with it (a program started from its console script cannot import
``tests``). So pytest is given this module as ``--ds`` (pyproject.toml): the processes of a
parallel run inherit that variable from the one that started them, and would read Tandem's
settings in place of these.
"""

import os
import socket
from pathlib import Path

_process = os.environ.get("PYTEST_XDIST_WORKER")
_instance = f"test_tandem_{_process}" if _process else "test_tandem"
os.environ["TANDEM_INSTANCE"] = _instance
if _process:
    os.environ["TANDEM_HOST"] = f"{os.environ.get('TANDEM_HOST', socket.gethostname())}-{_process}"
os.environ["DJANGO_SETTINGS_MODULE"] = "backend.settings"  # for the programs a test starts

from backend.settings import *  # noqa: E402, F403
from backend.settings import MEDIA_ROOT  # noqa: E402

MEDIA_ROOT = Path(f"{MEDIA_ROOT}-{_instance}")
os.environ["TANDEM_MEDIA_ROOT"] = str(MEDIA_ROOT)
