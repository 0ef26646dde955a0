"""docker-compose.yml describes a deployment that can start: every service has an image, the
platform services get the settings production needs, dependencies and volumes exist, the model
server asks for a GPU, and every variable a deployer must supply is documented."""

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings

from model_serving.vllm import serve_command

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"

PLATFORM_SERVICES = ["web", "worker", "worker-desktops", "worker-rollouts", "worker-train", "beat"]
GPU_SERVICES = {"vllm", "worker-train"}
REQUIRED_SERVICES = {
    "postgres",
    "redis",
    "minio",
    "web",
    "worker",
    "worker-desktops",
    "worker-rollouts",
    "worker-train",
    "beat",
    "websockify",
    "vllm",
}

# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}, ${VAR:+alt} and $VAR.
BRACED = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?[^}]*\}")
UNBRACED = re.compile(r"\$(?P<name>[A-Za-z_][A-Za-z0-9_]*)")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict[str, Any]]:
    return compose["services"]


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in environment)
    return {name: "" if value is None else str(value) for name, value in environment.items()}


def command_words(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(word) for word in command]


def strings_in(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings_in(value)


def interpolations(compose: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    """(variable, operator) for every interpolation in the file's values; $$ is a literal $."""
    for text in strings_in(compose):
        text = text.replace("$$", "")
        for match in BRACED.finditer(text):
            yield match["name"], match["op"]
        for match in UNBRACED.finditer(BRACED.sub("", text)):
            yield match["name"], None


def documented_variables() -> set[str]:
    return {
        line.split("=", 1)[0].strip()
        for line in ENV_EXAMPLE.read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    }


def queues_of(service: dict[str, Any]) -> set[str]:
    """The queues a `celery -A backend worker -Q ...` service consumes; none for other services."""
    words = command_words(service)
    if words[:4] != ["celery", "-A", "backend", "worker"] or "-Q" not in words:
        return set()
    return set(words[words.index("-Q") + 1].split(","))


def named_volume(mount: str | dict[str, Any]) -> str | None:
    """The named volume a mount uses; None for bind mounts."""
    if isinstance(mount, dict):
        source = mount.get("source") if mount.get("type", "volume") == "volume" else None
    else:
        source = mount.split(":", 1)[0] if ":" in mount else None
    if not source or source.startswith(("/", ".", "~", "$")):
        return None
    return source


def test_every_service_has_an_image_or_an_existing_build_context(services):
    for name, service in services.items():
        build = service.get("build")
        assert "image" in service or build, f"{name} has neither an image nor a build"
        if build is None:
            continue
        context = build if isinstance(build, str) else build.get("context", ".")
        context_dir = (ROOT / context).resolve()
        assert context_dir.is_dir(), f"{name}: build context {context} does not exist"
        dockerfile = (
            "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        )
        assert (context_dir / dockerfile).is_file(), f"{name}: {dockerfile} is not in {context}"


def test_every_part_of_the_platform_has_a_service(services):
    missing = REQUIRED_SERVICES - set(services)
    assert not missing, f"no service for {sorted(missing)}"


@pytest.mark.parametrize("name", PLATFORM_SERVICES)
def test_platform_service_gets_every_variable_production_requires(services, name):
    environment = environment_of(services[name])
    missing = [var for var in settings.PRODUCTION_REQUIRED_ENV if not environment.get(var)]
    assert not missing, f"{name} lacks {missing}"


@pytest.mark.parametrize("name", PLATFORM_SERVICES)
def test_platform_service_runs_with_debug_off_and_files_in_s3(services, name):
    environment = environment_of(services[name])
    assert environment["TANDEM_DEBUG"] == "0"
    assert environment["TANDEM_STORAGE"] == "s3"
    for var in (
        "TANDEM_S3_BUCKET",
        "TANDEM_S3_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    ):
        assert environment.get(var), f"{name} lacks {var}"


def test_required_secrets_have_no_default_to_fall_back_on(services):
    for name in PLATFORM_SERVICES:
        environment = environment_of(services[name])
        for var in ("TANDEM_SECRET_KEY", "TANDEM_DB_PASSWORD", "AWS_SECRET_ACCESS_KEY"):
            operators = {op for _, op in interpolations({var: environment[var]})}
            assert operators == {":?"}, f"{name}: {var} must be required, not {environment[var]}"


def test_every_dependency_names_an_existing_service(services):
    for name, service in services.items():
        for dependency in service.get("depends_on") or []:
            assert dependency in services, f"{name} depends on unknown service {dependency}"


def test_services_without_a_gpu_never_wait_for_the_model_server(services):
    for name, service in services.items():
        if "gpu" not in (service.get("profiles") or []):
            assert "vllm" not in (service.get("depends_on") or []), name


def test_model_server_and_training_worker_start_only_with_the_gpu_profile(services):
    assert all(services[name]["profiles"] == ["gpu"] for name in GPU_SERVICES)
    assert all("profiles" not in services[name] for name in REQUIRED_SERVICES - GPU_SERVICES)


@pytest.mark.parametrize("name", sorted(GPU_SERVICES))
def test_gpu_services_reserve_an_nvidia_gpu(services, name):
    devices = services[name]["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)


def test_training_runs_on_a_gpu_worker_that_consumes_only_the_train_queue(services):
    assert settings.CELERY_TASK_ROUTES["model_serving.jobs.run_finetune_job"] == {"queue": "train"}
    train = services["worker-train"]
    assert queues_of(train) == {"train"}
    words = command_words(train)
    assert words[words.index("--pool") + 1] == "solo"  # one job at a time on the GPU
    others = [name for name in services if name != "worker-train"]
    assert not any("train" in queues_of(services[name]) for name in others)
    # Its image carries the `train` extra; the others' do not.
    assert train["build"]["args"]["TANDEM_EXTRAS"] == "train"
    assert train["image"] != services["worker"]["image"]
    extras = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "ARG TANDEM_EXTRAS" in extras and "optional-dependencies" in extras


def test_model_server_reads_the_adapters_the_platform_copies(services):
    def mount_of(service: dict[str, Any], volume: str) -> str:
        return next(m.split(":")[1] for m in service["volumes"] if m.startswith(f"{volume}:"))

    environment = environment_of(services["worker"])
    assert mount_of(services["worker"], "adapters") == environment["TANDEM_ADAPTER_DIR"]
    assert mount_of(services["vllm"], "adapters") == environment["TANDEM_VLLM_ADAPTER_DIR"]


def test_model_server_takes_five_screenshots_a_long_context_and_lora_adapters(services):
    words = command_words(services["vllm"])
    assert services["vllm"]["image"].startswith("vllm/vllm-openai")
    assert "ByteDance-Seed/UI-TARS-1.5-7B" in words
    limit = yaml.safe_load(words[words.index("--limit-mm-per-prompt") + 1])
    assert limit["image"] >= 5
    assert int(words[words.index("--max-model-len") + 1]) >= 32768
    assert "--enable-lora" in words
    assert "--enable-prefix-caching" in words
    assert "/health" in " ".join(services["vllm"]["healthcheck"]["test"])


def test_model_server_runs_exactly_the_command_serve_model_prints(services):
    vllm = services["vllm"]
    command = serve_command("ByteDance-Seed/UI-TARS-1.5-7B")
    assert [str(word) for word in vllm["entrypoint"]] + command_words(vllm) == command.argv
    assert command.env.items() <= environment_of(vllm).items()


def test_web_migrates_then_serves_the_asgi_app_and_is_checked_on_healthz(services):
    web = services["web"]
    command = " ".join(command_words(web))
    assert command.index("manage.py migrate") < command.index(
        "uvicorn backend.asgi:application --host 0.0.0.0 --port 8000"
    )
    assert "/healthz" in " ".join(web["healthcheck"]["test"])


def test_workers_consume_every_queue_tasks_are_routed_to(services):
    consumed = set().union(*(queues_of(service) for service in services.values()))
    routed = {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    assert routed | {settings.CELERY_TASK_DEFAULT_QUEUE} <= consumed


def test_desktop_work_has_a_worker_of_its_own(services):
    host = services["worker-desktops"]["environment"]["TANDEM_HOST"]
    assert queues_of(services["worker-desktops"]) == {"desktops", f"desktops.{host}"}
    assert not any(q.startswith("desktops") for q in queues_of(services["worker"]))


def test_the_hosts_rollouts_run_in_processes_of_their_own_beside_its_desktops(services):
    rollouts, desktops = services["worker-rollouts"], services["worker-desktops"]
    host = environment_of(rollouts)["TANDEM_HOST"]
    assert host == desktops["environment"]["TANDEM_HOST"]
    assert queues_of(rollouts) == {f"rollouts.{host}"}
    assert rollouts["deploy"]["replicas"] >= 2
    # The desktops reached as their worker does: as root, through the same sockets' mounts...
    assert rollouts["user"] == desktops["user"] == "root"
    engine = [v for v in desktops["volumes"] if v.endswith(":/var/run/docker.sock")]
    assert len(engine) == 1
    assert set(rollouts["volumes"]) == set(desktops["volumes"]) - set(engine)
    # ...and nothing more: no engine socket, no privilege the desktop worker's jail needs.
    assert desktops["cap_add"] == ["SYS_ADMIN"] and not rollouts.get("cap_add")
    assert not rollouts.get("security_opt")


def test_beat_runs_the_schedule(services):
    assert command_words(services["beat"])[:4] == ["celery", "-A", "backend", "beat"]


def test_websockify_looks_stream_tokens_up_in_the_platform_database(services):
    words = command_words(services["websockify"])
    assert words[:3] == ["python", "-m", "vm_pool.recording.proxy"]
    assert words[words.index("--token-source") + 1] == "backend.settings"
    assert environment_of(services["websockify"]) == environment_of(services["web"])


def test_websockify_runs_beside_the_desktop_worker_and_its_port_is_published(services):
    websockify, worker = services["websockify"], services["worker-desktops"]
    assert websockify["network_mode"] == "service:worker-desktops"
    assert "worker-desktops" in websockify["depends_on"]
    assert command_words(websockify)[-1] == "0.0.0.0:6080"
    assert any(str(port).endswith(":6080") for port in worker["ports"])


def test_bucket_is_created_before_the_platform_starts(services):
    init = " ".join(command_words(services["minio-init"]))
    bucket = environment_of(services["web"])["TANDEM_S3_BUCKET"]
    assert f"mc mb --ignore-existing tandem/{bucket}" in init
    assert services["web"]["depends_on"]["minio-init"]["condition"] == (
        "service_completed_successfully"
    )


def test_every_variable_is_defaulted_or_documented_in_env_example(compose):
    documented = documented_variables()
    undocumented = {
        name
        for name, op in interpolations(compose)
        if op not in (":-", "-") and name not in documented
    }
    assert not undocumented, f"set these in .env.example: {sorted(undocumented)}"


def test_env_example_documents_only_variables_the_compose_file_uses(compose):
    used = {name for name, _ in interpolations(compose)}
    assert documented_variables() <= used, documented_variables() - used


def test_every_named_volume_a_service_mounts_is_declared(compose):
    declared = set(compose.get("volumes") or {})
    for name, service in compose["services"].items():
        for mount in service.get("volumes") or []:
            volume = named_volume(mount)
            assert volume is None or volume in declared, f"{name} mounts undeclared {volume}"


def test_docker_build_context_leaves_out_local_environments_and_secrets():
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", "var", ".env", "**/node_modules"} <= ignored


def test_desktop_host_runs_container_desktops_on_its_engine(services):
    worker, websockify = services["worker-desktops"], services["websockify"]
    environment = worker["environment"]
    assert worker["user"] == "root"
    assert environment["TANDEM_DOCKER_URL"] == "unix:///var/run/docker.sock"
    root = environment["TANDEM_DESKTOP_ROOT"]
    # The engine mounts the desktops' directories by their host path: the same path inside.
    assert f"{root}:{root}" in worker["volumes"] and f"{root}:{root}" in websockify["volumes"]
    assert any(v.endswith(":/var/run/docker.sock") for v in worker["volumes"])
