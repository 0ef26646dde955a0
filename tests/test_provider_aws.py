"""The aws provider against moto's EC2 server (a real HTTP API in a subprocess).

moto runs no machine, so no agent ever answers: a start gives up and terminates its instance,
and health reports the agent unreachable. ``run_instance`` (the first half of a start) is
checked on its own. moto is told to validate AMI ids as EC2 does.
"""

import base64
import json
import urllib.request
from dataclasses import replace

import boto3
import pytest

from tests.services import BIN, free_port, port_open, running
from vm_pool.actions import ScreenSize
from vm_pool.agent import AgentConfig
from vm_pool.agent_client import AgentClient
from vm_pool.providers import desktop_image
from vm_pool.providers.aws import AwsProvider, user_data
from vm_pool.providers.base import DesktopError, DesktopProvider, DesktopSpec, Endpoint
from vm_pool.providers.registry import get_provider

pytestmark = pytest.mark.services

REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "tandem", "AWS_SECRET_ACCESS_KEY": "tandem-secret"}


@pytest.fixture(scope="module")
def moto_endpoint():
    port = free_port()
    env = {"PATH": str(BIN), "MOTO_ENABLE_AMI_VALIDATION": "true"}
    with running([str(BIN / "moto_server"), "-p", str(port)], env, port_open(port)):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def ec2(moto_endpoint, settings, monkeypatch):
    """A client of an emptied moto EC2, with the provider's settings pointing at it."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", b""))
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("ec2", endpoint_url=moto_endpoint, region_name=REGION)
    vpc = client.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnet = client.create_subnet(VpcId=vpc, CidrBlock="10.20.1.0/24")["Subnet"]["SubnetId"]
    group = client.create_security_group(
        GroupName="tandem-desktops", Description="VNC and agent from workers", VpcId=vpc
    )["GroupId"]
    client.create_key_pair(KeyName="tandem-ops")
    settings.TANDEM_AWS_ENDPOINT_URL = moto_endpoint
    settings.TANDEM_AWS_REGION = REGION
    settings.TANDEM_AWS_INSTANCE_TYPE = "t3.large"
    settings.TANDEM_AWS_SUBNET_ID = subnet
    settings.TANDEM_AWS_SECURITY_GROUP_IDS = [group]
    settings.TANDEM_AWS_KEY_NAME = "tandem-ops"
    settings.TANDEM_AWS_START_TIMEOUT = 3
    settings.TANDEM_HOST = "worker-a"
    return client


@pytest.fixture
def ami(ec2) -> str:
    """An AMI id moto knows (one of the public images it serves)."""
    images = ec2.describe_images(Filters=[{"Name": "name", "Values": ["ubuntu*"]}])["Images"]
    return sorted(image["ImageId"] for image in images)[0]


@pytest.fixture
def spec(ami) -> DesktopSpec:
    return DesktopSpec(
        desktop_id=17,
        screen=ScreenSize(1280, 800),
        agent_key="fedcba9876543210fedcba9876543210",
        autostart=(("mousepad",),),
        image=ami,
    )


def secrets_of(spec: DesktopSpec) -> list[str]:
    return [spec.agent_key]


def instances_of(ec2, desktop_id: int) -> list[dict]:
    answer = ec2.describe_instances(
        Filters=[{"Name": "tag:tandem:desktop", "Values": [str(desktop_id)]}]
    )
    return [i for r in answer["Reservations"] for i in r["Instances"]]


def state(ec2, instance_id: str) -> str:
    answer = ec2.describe_instances(InstanceIds=[instance_id])
    return answer["Reservations"][0]["Instances"][0]["State"]["Name"]


def user_data_of(ec2, instance_id: str) -> str:
    attribute = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    return base64.b64decode(attribute["UserData"]["Value"]).decode()


def config_in(script: str) -> dict:
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith("<<'TANDEM_AGENT_CONFIG'"))
    assert lines[start + 2] == "TANDEM_AGENT_CONFIG"
    return json.loads(lines[start + 1])


def test_run_instance_runs_one_instance_of_the_ami_where_the_settings_say(ec2, spec, settings):
    endpoint = AwsProvider().run_instance(spec)

    (instance,) = instances_of(ec2, spec.desktop_id)
    assert instance["InstanceId"] == endpoint.instance_id
    assert instance["State"]["Name"] == "running"
    assert instance["ImageId"] == spec.image
    assert instance["InstanceType"] == "t3.large"
    assert instance["SubnetId"] == settings.TANDEM_AWS_SUBNET_ID
    assert [g["GroupId"] for g in instance["SecurityGroups"]] == (
        settings.TANDEM_AWS_SECURITY_GROUP_IDS
    )
    assert instance["KeyName"] == "tandem-ops"
    assert not instance.get("PublicIpAddress")
    address = instance["PrivateIpAddress"]
    assert address.startswith("10.20.1.")
    assert (endpoint.vnc_host, endpoint.vnc_port) == (address, 5900)
    assert endpoint.control_address == f"{address}:7000"
    assert endpoint.screen == spec.screen


def test_instances_are_tagged_with_their_desktop_and_host(ec2, spec):
    endpoint = AwsProvider().run_instance(spec)

    (instance,) = instances_of(ec2, spec.desktop_id)
    tags = {tag["Key"]: tag["Value"] for tag in instance["Tags"]}
    assert tags == {
        "Name": "tandem-desktop-17",
        "tandem:desktop": "17",
        "tandem:host": "worker-a",
    }
    assert instance["InstanceId"] == endpoint.instance_id


def test_user_data_writes_the_agent_config_and_starts_the_agent(ec2, spec):
    endpoint = AwsProvider().run_instance(spec)

    script = user_data_of(ec2, endpoint.instance_id)
    assert script == user_data(spec)
    assert script.startswith("#!/bin/sh\nset -eu\numask 077\n")
    config = config_in(script)
    assert config == desktop_image.agent_config(spec)
    loaded = AgentConfig(**config)
    assert loaded.agent_key == spec.agent_key
    assert loaded.autostart == [["mousepad"]]
    assert f"cat > {desktop_image.CONFIG_PATH} <<'TANDEM_AGENT_CONFIG'" in script
    assert "chown user:user /etc/tandem/agent.json" in script
    assert "-d 169.254.169.254 -m owner --uid-owner user -j REJECT" in script
    (agent_line,) = [line for line in script.splitlines() if line.startswith("systemd-run")]
    assert "--uid=user" in agent_line
    assert agent_line.endswith(" ".join(desktop_image.AGENT_COMMAND))


def test_secrets_are_in_the_user_data_only(ec2, spec):
    endpoint = AwsProvider().run_instance(spec)

    described = json.dumps(ec2.describe_instances(), default=str)
    tags = json.dumps(ec2.describe_tags(), default=str)
    assert not [s for s in secrets_of(spec) if s in described or s in tags]
    script = user_data_of(ec2, endpoint.instance_id)
    assert all(secret in script for secret in secrets_of(spec))


def test_an_instance_whose_agent_does_not_answer_is_unhealthy_with_the_reason(ec2, spec):
    endpoint = AwsProvider().run_instance(spec)

    health = AwsProvider().health(replace(spec, instance_id=endpoint.instance_id))
    assert not health.ok
    # Whatever answers at the address (nothing, or a stranger), it is not a healthy agent.
    assert health.reason.startswith(
        f"instance {endpoint.instance_id} is running but its agent at "
        f"{endpoint.control_address} is not healthy: "
    )


def test_a_terminated_or_unknown_instance_is_unhealthy(ec2, spec):
    endpoint = AwsProvider().run_instance(spec)
    ec2.terminate_instances(InstanceIds=[endpoint.instance_id])

    health = AwsProvider().health(replace(spec, instance_id=endpoint.instance_id))
    assert not health.ok and health.reason.startswith(f"instance {endpoint.instance_id} is ")
    gone = AwsProvider().health(replace(spec, instance_id="i-0123456789abcdef0"))
    assert (gone.ok, gone.reason) == (False, "instance i-0123456789abcdef0 is gone")


def test_start_gives_up_on_an_agent_that_never_answers_and_terminates_its_instance(ec2, spec):
    with pytest.raises(DesktopError, match="agent did not answer in 3s"):
        AwsProvider().start(spec)

    (instance,) = instances_of(ec2, spec.desktop_id)
    assert instance["State"]["Name"] in {"shutting-down", "terminated"}


def test_reset_terminates_the_old_instance_and_runs_a_new_one(ec2, spec):
    old = AwsProvider().run_instance(spec)
    fresh = replace(spec, agent_key="0" * 32)

    # The new instance's agent never answers here either, so the reset ends in an error.
    with pytest.raises(DesktopError, match="agent did not answer"):
        AwsProvider().reset(replace(fresh, instance_id=old.instance_id))

    instances = instances_of(ec2, spec.desktop_id)
    assert len(instances) == 2
    (new,) = [i for i in instances if i["InstanceId"] != old.instance_id]
    assert state(ec2, old.instance_id) in {"shutting-down", "terminated"}
    assert new["ImageId"] == spec.image
    assert config_in(user_data_of(ec2, new["InstanceId"]))["agent_key"] == "0" * 32


def test_stop_terminates_and_stopping_again_is_fine(ec2, spec):
    endpoint = AwsProvider().run_instance(spec)
    stopped = replace(spec, instance_id=endpoint.instance_id)

    AwsProvider().stop(stopped)
    assert state(ec2, endpoint.instance_id) in {"shutting-down", "terminated"}
    AwsProvider().stop(stopped)
    AwsProvider().stop(replace(spec, instance_id="i-0123456789abcdef0"))


def test_stop_finds_an_instance_whose_id_was_never_recorded(ec2, spec):
    endpoint = AwsProvider().run_instance(spec)
    other = AwsProvider().run_instance(replace(spec, desktop_id=18))

    AwsProvider().stop(spec)  # no instance_id: found by its desktop and host tags

    assert state(ec2, endpoint.instance_id) in {"shutting-down", "terminated"}
    assert state(ec2, other.instance_id) == "running"


def test_an_unknown_ami_is_a_clear_error(ec2, spec):
    with pytest.raises(DesktopError, match=r"run an instance of ami-0badc0ffee0000000.*AMI"):
        AwsProvider().start(replace(spec, image="ami-0badc0ffee0000000"))
    assert instances_of(ec2, spec.desktop_id) == []


def test_a_template_without_an_ami_is_a_clear_error(ec2, spec):
    with pytest.raises(DesktopError, match="names no AMI"):
        AwsProvider().start(replace(spec, image=""))


def test_aws_is_a_registered_provider_that_controls_through_the_agent():
    provider = get_provider("aws")
    assert isinstance(provider, AwsProvider) and isinstance(provider, DesktopProvider)
    assert {"view_only_vnc", "home_restore", "launch", "run", "files"} <= provider.capabilities
    screen = ScreenSize(1280, 800)
    spec = DesktopSpec(17, screen, "Vnc4Ctrl", "Vnc4View", "k" * 32, image="ami-12c6146b")
    endpoint = Endpoint("i-1", "10.20.1.5", 5900, screen, control_address="10.20.1.5:7000")
    control = provider.control(spec, endpoint)
    assert isinstance(control, AgentClient)
    assert (control.address, control.key) == ("10.20.1.5:7000", spec.agent_key)
