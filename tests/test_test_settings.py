"""The test run's own settings are in effect, in every process of a parallel run, and what an
earlier run left in Redis under a test instance's prefix is cleared."""

import os
import sys
import uuid

import pytest
import redis
from django.conf import settings

from backend.celery import app
from tests.support.services import clear_redis_keys


def test_each_process_of_a_parallel_run_is_an_instance_of_its_own():
    """Two processes sharing a Redis prefix take each other's jobs (a proposal for a step of
    the other process's database), and sharing a media folder, each other's files; a run
    sharing a deployment's prefix, the deployment's."""
    assert "tests.settings" in sys.modules  # read in place of Tandem's own
    process = os.environ.get("PYTEST_XDIST_WORKER")
    instance = f"test_tandem_{process}" if process else "test_tandem"
    assert instance == settings.TANDEM_INSTANCE
    assert f"{instance}:" == app.conf.broker_transport_options["global_keyprefix"]
    assert settings.MEDIA_ROOT.name.endswith(f"-{instance}")
    assert os.environ["TANDEM_MEDIA_ROOT"] == str(settings.MEDIA_ROOT)  # for its programs
    if process:
        assert settings.TANDEM_HOST.endswith(f"-{process}")


def test_a_test_instances_keys_are_cleared_in_every_database_and_no_one_elses():
    left = f"test_tandem_{uuid.uuid4().hex[:8]}:"
    other = f"test_tandem_{uuid.uuid4().hex[:8]}:"
    where = redis.connection.parse_url(settings.REDIS_URL)
    clients = [redis.Redis(**{**where, "db": database}) for database in (0, 13)]
    try:
        for client in clients:
            client.rpush(f"{left}model", "a proposal nobody took")
            client.set(f"{left}unacked_index", "1")
            client.set(f"{other}model", "another instance's")
        assert clear_redis_keys(left) == 4
        assert [client.keys(f"{left}*") for client in clients] == [[], []]
        assert [client.get(f"{other}model") for client in clients] == [b"another instance's"] * 2
        with pytest.raises(ValueError, match="not a test instance's prefix"):
            clear_redis_keys("tandem:")
    finally:
        for client in clients:
            client.delete(f"{other}model", f"{left}model", f"{left}unacked_index")
            client.close()
