"""The frozen vision tower's outputs kept across steps (``training.vision``) and the rows
shuffled within pools of episodes that meet them there (``training.episode_pools``), on the
CPU with the tiny Qwen2.5-VL: what is encoded, what is evicted, what is never mistaken for
another image, and what a real job reads and encodes."""

import json

import datasets
import pytest
import torch
from django.core.files.storage import default_storage

from backend.accounts.roles import Role
from model_serving import finetune
from model_serving.models import FineTuneJob
from model_serving.training import cost, episode_pools, trainer
from model_serving.training.spec import Hyperparameters
from model_serving.training.vision import FrozenVisionTower, vision_tower
from tests.support.export_data import make_episodes
from tests.support.finetune_data import built_export, job_body

GRID = [1, 8, 8]  # one image's patch grid: 64 patches, 16 tokens after the 2×2 merge
CHANNELS = 3 * 2 * 14 * 14  # RGB × temporal patch × patch area


@pytest.fixture
def frozen(base_model):
    """A function that wraps a fresh copy of the tiny base's tower with a cache of that many
    images' outputs, and encodes lists of images with it."""

    def make(images: float):
        model = trainer.load_model(str(base_model), Hyperparameters())
        tower = vision_tower(model)
        wrapper = FrozenVisionTower.install(model)
        wrapper.cache_bytes = int(images * image_bytes(wrapper))

        def encode(*pictures: torch.Tensor) -> torch.Tensor:
            grid = torch.tensor([GRID] * len(pictures))
            with torch.no_grad():
                return tower(torch.cat(pictures), grid).pooler_output

        return wrapper, encode

    return make


def _pictures(count: int, seed: int = 5) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(64, CHANNELS, generator=generator) for _ in range(count)]


def test_a_screenshot_met_in_a_later_step_is_not_encoded_again(frozen):
    wrapper, encode = frozen(images=10)
    a, b, c = _pictures(3)
    first = encode(a, b)
    wrapper.new_step()
    second = encode(b.clone(), c)  # the same pixels in another tensor

    assert (wrapper.counts.asked, wrapper.counts.encoded) == (4, 3)
    fresh, _ = frozen(images=0)
    expected = _own_output(fresh, b, c)
    assert torch.allclose(second, expected, atol=1e-6)
    assert torch.equal(second[:16], first[16:])  # b's output, kept from the first step


def _own_output(wrapper: FrozenVisionTower, *pictures: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        grid = torch.tensor([GRID] * len(pictures))
        return wrapper.encode(torch.cat(pictures), grid).pooler_output


def test_the_cache_evicts_the_least_recently_used_and_never_what_this_step_uses(frozen):
    wrapper, encode = frozen(images=2)
    a, b, c, d, e, f = _pictures(6)
    one = image_bytes(wrapper)
    for pictures in ([a], [b], [a], [c], [a]):  # c evicts b, which a outlived
        wrapper.new_step()
        encode(*pictures)
    assert wrapper.counts.encoded == 3
    wrapper.new_step()
    encode(b)
    assert wrapper.counts.encoded == 4  # b was evicted
    assert wrapper.cached_bytes == 2 * one

    wrapper.new_step()
    encode(d, e, f)  # one step's own images stay, over the budget, until the next step
    assert wrapper.cached_bytes == 3 * one
    encode(d, e, f)
    assert wrapper.counts.encoded == 7
    wrapper.new_step()
    assert wrapper.cached_bytes == 2 * one


def image_bytes(wrapper: FrozenVisionTower) -> int:
    """One image's output in the cache: 16 tokens of the tower's output width, in float32."""
    return 16 * int(wrapper.tower.config.out_hidden_size) * 4


def test_with_no_budget_each_step_keeps_its_own_screenshots_only(frozen):
    wrapper, encode = frozen(images=0)
    a, b = _pictures(2)
    encode(a, a.clone(), b)
    encode(b)  # the same step
    assert (wrapper.counts.asked, wrapper.counts.encoded) == (4, 2)
    wrapper.new_step()
    assert wrapper.cached_bytes == 0
    encode(a)
    assert wrapper.counts.encoded == 3


def test_images_that_differ_anywhere_are_never_taken_for_one_another(frozen):
    wrapper, encode = frozen(images=100)
    (a,) = _pictures(1)
    nudged = a.clone()
    nudged[40, 100] = torch.nextafter(nudged[40, 100], torch.tensor(10.0))  # one ulp, one value
    swapped = a.clone()
    swapped[[3, 60]] = a[[60, 3]]  # two patches trade places: the same values, elsewhere
    negated = a.clone()
    negated[7, 7] = -negated[7, 7]  # the sign bit alone
    outputs = [encode(picture) for picture in (a, nudged, swapped, negated)]
    assert wrapper.counts.encoded == 4
    # The same 64 patches as another grid are another image.
    with torch.no_grad():
        wrapper.tower(a, torch.tensor([[1, 4, 16]]))
    assert wrapper.counts.encoded == 5
    assert not torch.equal(outputs[0], outputs[2])
    encode(a.clone())  # and the same pixels again are the same image
    assert wrapper.counts.encoded == 5


def test_an_image_is_found_again_after_images_of_another_size(frozen):
    """The hashes' weights are kept for one size at a time and drawn again for another: the
    same pixels give the same key whichever sizes came between."""
    wrapper, encode = frozen(images=100)
    a, small = _pictures(2)
    encode(a)
    with torch.no_grad():
        wrapper.tower(small[:16], torch.tensor([[1, 4, 4]]))  # 16 patches: weights drawn again
    encode(a.clone())
    assert (wrapper.counts.asked, wrapper.counts.encoded) == (3, 2)
    assert wrapper._drawn is not None and wrapper._drawn.shape == (2, 64 * CHANNELS)


def test_pools_hold_whole_episodes_and_every_row_once_an_epoch():
    # Rows as an export may hold them: episodes interleaved, of 4, 3, 2 and 1 rows.
    episodes = [7, 3, 7, 3, 7, 3, 7, 9, 9, 4]
    pools = episode_pools.EpisodePools(episodes, rows_per_pool=5, seed=42)

    assert len(pools) == 10
    for epoch in range(4):
        drawn = pools.pools(epoch)
        assert sorted(row for pool in drawn for row in pool) == list(range(10))
        for pool in drawn:
            held = {episodes[row] for row in pool}
            assert sum(episodes.count(e) for e in held) == len(pool)  # whole episodes only
            assert len(pool) <= 5
        assert pools.order(epoch) == [row for pool in drawn for row in pool]
    assert list(pools) == pools.order(0)  # the same order again: a resumed job reads the same
    orders = set()
    for epoch in range(6):
        pools.set_epoch(epoch)
        orders.add(tuple(pools))
    assert len(orders) > 1  # reshuffled each epoch
    # An episode longer than a pool is a pool of its own; a dataset that fits is one pool,
    # its rows shuffled across episodes.
    small = episode_pools.EpisodePools(episodes, 2, seed=1).pools(0)
    assert sorted(map(len, small)) == [1, 2, 3, 4]
    whole = episode_pools.EpisodePools(episodes, 10, seed=1).pools(0)
    assert len(whole) == 1
    assert [episodes[row] for row in whole[0]] != sorted(episodes, key=episodes.index)


def test_rows_that_do_not_name_their_episode_are_shuffled_as_usual():
    table = datasets.Dataset.from_dict({"prompt": ["a", "b"]})
    assert episode_pools.EpisodePools.of(table, 4, seed=1) is None
    assert episode_pools.rows_per_pool(8 * cost.GIB, 19_289_088) == 445  # 7B, one 1080p image
    assert episode_pools.rows_per_pool(0, 19_289_088) == 1


@pytest.mark.django_db
def test_a_job_encodes_each_screenshot_of_the_rows_it_read_once(
    export_storage, project, make_user, token_client_for, base_model
):
    engineer = make_user("erin", project, Role.ENGINEER)
    annotator = make_user("ann", project, Role.ANNOTATOR)
    make_episodes(project, annotator, episodes=2, steps=12, distinct_screens=24, episode_offset=12)
    sft = built_export(project, engineer, "sft")
    client, _ = token_client_for(engineer, ["models:write"])
    steps = 10

    def counts(**settings) -> dict[str, int]:
        request = job_body([sft], base_model, **settings)
        request["hyperparameters"]["max_steps"] = steps
        request["version_name"] += f"-{len(settings)}"
        created = client.post("/api/finetune-jobs/", request, format="json")
        assert finetune.run_job(created.json()["id"]) == "succeeded"
        job = FineTuneJob.objects.get(pk=created.json()["id"])
        with default_storage.open(f"{job.artifacts_location}/adapter/tandem_training.json") as f:
            return json.load(f)["stages"][0]["vision_tower"]

    rows = datasets.load_dataset(
        "parquet", data_files=default_storage.path(f"{sft.location}data/*.parquet"), split="train"
    )
    images = [[image.tobytes() for image in row["images"]] for row in rows]
    # The tiny tower's outputs all fit the default cache: the rows are one pool.
    order = episode_pools.EpisodePools.of(rows, len(rows), seed=Hyperparameters().seed).order(0)
    read = order[:steps]
    assert len({row["episode_id"] for row in rows.select(read)}) == 2  # both episodes mixed
    cached = counts()
    assert cached["asked"] == sum(len(images[r]) for r in read)
    assert cached["encoded"] == len({image for r in read for image in images[r]})
    assert cached["encoded"] < cached["asked"]
    # Without the cache (the rows then shuffled by TRL) every step encodes its own row's
    # screenshots, each distinct here.
    uncached = counts(vision_cache_gib=0)
    assert uncached["encoded"] == uncached["asked"] > cached["encoded"]


@pytest.mark.django_db
def test_a_vision_cache_that_is_not_a_size_is_refused_before_a_job_exists(exports, base_model):
    sft, _, client = exports
    for wrong in (-1, True, "8", 1e9, None):
        for path in ("/api/finetune-jobs/estimate/", "/api/finetune-jobs/"):
            response = client.post(
                path, job_body([sft], base_model, vision_cache_gib=wrong), format="json"
            )
            assert response.status_code == 400, (wrong, path)
            message = response.json()["error"]["message"]
            assert "vision_cache_gib must be a" in message and "number" in message
    assert not FineTuneJob.objects.exists()


def test_the_estimate_adds_the_vision_cache_up_to_what_the_rows_can_fill():
    seven = ("qwen2.5-vl-7b", cost.MEASURED.parameters)
    many = [("sft", [15_000] * 1_000)]
    without = cost.estimate(many, Hyperparameters(vision_cache_gib=0), seven)["stages"][0]
    default = cost.estimate(many, Hyperparameters(), seven)["stages"][0]
    assert default["vision_cache_gib"] == 8
    assert default["gpu_memory_gib"] == pytest.approx(without["gpu_memory_gib"] + 8, abs=0.1)
    # Two rows cannot fill 8 GiB: a row's tokens of the 7B's width in bf16 each, at most.
    few = cost.estimate([("sft", [15_000] * 2)], Hyperparameters(), seven)["stages"][0]
    assert few["vision_cache_gib"] == pytest.approx(2 * 15_000 * 3584 * 2 / cost.GIB, abs=0.01)
