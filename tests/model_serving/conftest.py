"""Fixtures of the fine-tuning tests: the demo's tiny base model (built once a session and only
read), storage of the test's own, and SFT plus DPO exports of two short episodes with an
engineer's API client."""

import pytest

from backend.accounts.roles import Role
from model_serving.demo_model import save_demo_base
from tests.support.export_data import make_episodes
from tests.support.finetune_data import built_export


@pytest.fixture(scope="session")
def base_model(tmp_path_factory):
    return save_demo_base(tmp_path_factory.mktemp("tiny-base"))


@pytest.fixture
def export_storage(settings, tmp_path):
    """Exports and job artifacts in this test's own folder; no episode held out."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.TANDEM_EXPORT_STAGING_ROOT = tmp_path / "staging"
    settings.TANDEM_HELD_OUT_SHARE = 0.0


@pytest.fixture
def exports(export_storage, project, make_user, token_client_for):
    engineer = make_user("erin", project, Role.ENGINEER)
    make_episodes(project, make_user("ann", project, Role.ANNOTATOR), episodes=2, steps=4)
    client, _ = token_client_for(engineer, ["models:write"])
    return built_export(project, engineer, "sft"), built_export(project, engineer, "dpo"), client
