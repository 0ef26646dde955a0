"""The aws provider against moto's EC2 server (a real HTTP API in a subprocess).

moto runs no machine, so no agent ever answers: a start gives up and terminates its instance,
and health reports the agent unreachable. ``run_instance`` (the first half of a start) is
checked on its own. moto is told to validate AMI ids as EC2 does. The agent's key is checked on
both ends over TCP on loopback: the real agent's HTTP handler, and the provider's client.
"""

import base64
import json
import shlex
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest

from tests.support.services import BIN, free_port, port_open, running
from vm_pool.actions import ScreenSize
from vm_pool.agent.endpoint import make_handler, serve
from vm_pool.agent.server import AgentConfig, Desktop
from vm_pool.agent_client import AgentClient
from vm_pool.desktop import DesktopError, DesktopSpec, Endpoint
from vm_pool.providers import desktop_image
from vm_pool.providers.aws import AwsProvider, exposures, user_data
from vm_pool.providers.base import DesktopProvider
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
    (interface,) = instance["NetworkInterfaces"]
    assert [g["GroupId"] for g in interface["Groups"]] == settings.TANDEM_AWS_SECURITY_GROUP_IDS
    assert interface["SubnetId"] == settings.TANDEM_AWS_SUBNET_ID
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
    # vm_pool from the image's read-only directory; nothing of HOME or the working directory.
    assert "--setenv=PYTHONPATH=/opt/tandem" in shlex.split(agent_line)
    assert desktop_image.AGENT_COMMAND[1:4] == ("-s", "-P", "-m")


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
    spec = DesktopSpec(17, screen, "k" * 32, image="ami-12c6146b")
    endpoint = Endpoint("i-1", "10.20.1.5", 5900, screen, control_address="10.20.1.5:7000")
    control = provider.control(spec, endpoint)
    assert isinstance(control, AgentClient)
    assert (control.address, control.key) == ("10.20.1.5:7000", spec.agent_key)


# --- only the platform reaches the agent, and the agent knows it is the platform ---------------


def vpc_of(ec2, group: str) -> str:
    return ec2.describe_security_groups(GroupIds=[group])["SecurityGroups"][0]["VpcId"]


def authorize(ec2, group: str, port: int, **source) -> None:
    rule = {"IpProtocol": "tcp", "FromPort": port, "ToPort": port, **source}
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[rule])


def test_an_instance_gets_no_public_address_even_where_its_subnet_gives_one(ec2, spec, settings):
    subnet = settings.TANDEM_AWS_SUBNET_ID
    ec2.modify_subnet_attribute(SubnetId=subnet, MapPublicIpOnLaunch={"Value": True})
    image = spec.image
    plain = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, SubnetId=subnet)
    assert plain["Instances"][0].get("PublicIpAddress")  # what the subnet does by default

    endpoint = AwsProvider().run_instance(spec)

    (instance,) = instances_of(ec2, spec.desktop_id)
    assert not instance.get("PublicIpAddress") and not instance["NetworkInterfaces"][0].get(
        "Association"
    )
    assert endpoint.control_address == f"{instance['PrivateIpAddress']}:7000"


def test_security_groups_that_open_the_agent_or_vnc_beyond_the_private_network_are_refused(
    ec2, spec, settings
):
    (group,) = settings.TANDEM_AWS_SECURITY_GROUP_IDS
    workers = ec2.create_security_group(
        GroupName="tandem-workers", Description="desktop workers", VpcId=vpc_of(ec2, group)
    )["GroupId"]
    authorize(ec2, group, 7000, IpRanges=[{"CidrIp": "10.30.0.0/16"}])  # the workers' subnet
    authorize(ec2, group, 5900, UserIdGroupPairs=[{"GroupId": workers}])
    authorize(ec2, group, 22, IpRanges=[{"CidrIp": "0.0.0.0/0"}])  # not a desktop port
    AwsProvider().run_instance(spec)  # the workers and the private network only: fine

    # The VPC's whole range holds the desktops' own subnet (10.20.1.0/24): one desktop would
    # reach another's agent.
    authorize(ec2, group, 5900, IpRanges=[{"CidrIp": "10.20.0.0/16"}])
    with pytest.raises(DesktopError, match=r"lets 10.20.0.0/16 \(which holds the desktops' subnet"):
        AwsProvider().run_instance(replace(spec, desktop_id=19))
    assert instances_of(ec2, 19) == []
    ec2.revoke_security_group_ingress(
        GroupId=group,
        IpPermissions=[{"IpProtocol": "tcp", "FromPort": 5900, "ToPort": 5900,
                        "IpRanges": [{"CidrIp": "10.20.0.0/16"}]}],
    )  # fmt: skip

    authorize(ec2, group, 7000, IpRanges=[{"CidrIp": "0.0.0.0/0"}])
    with pytest.raises(DesktopError, match=f"{group} lets 0.0.0.0/0 reach port 7000"):
        AwsProvider().run_instance(replace(spec, desktop_id=18))
    assert instances_of(ec2, 18) == []


def test_what_a_security_group_may_not_open_to(ec2, spec):
    def rule(protocol="tcp", ports=(7000, 7000), **source) -> dict:
        return {"IpProtocol": protocol, "FromPort": ports[0], "ToPort": ports[1], **source}

    def group(*rules: dict) -> dict:
        return {"GroupId": "sg-desktops", "IpPermissions": list(rules)}

    everyone = {"IpRanges": [{"CidrIp": "0.0.0.0/0"}]}
    assert exposures([group(rule(**everyone))]) == ["sg-desktops lets 0.0.0.0/0 reach port 7000"]
    assert exposures([group(rule("-1", (-1, -1), **everyone))]) == [
        "sg-desktops lets 0.0.0.0/0 reach port 7000",
        "sg-desktops lets 0.0.0.0/0 reach port 5900",
    ]
    assert exposures([group(rule(ports=(5000, 6000), IpRanges=[{"CidrIp": "8.8.0.0/16"}]))]) == [
        "sg-desktops lets 8.8.0.0/16 reach port 5900"
    ]
    assert exposures([group(rule(Ipv6Ranges=[{"CidrIpv6": "::/0"}]))]) == [
        "sg-desktops lets ::/0 reach port 7000"
    ]
    assert exposures([group(rule(PrefixListIds=[{"PrefixListId": "pl-1"}]))]) == [
        "sg-desktops lets prefix list pl-1 reach port 7000"
    ]
    assert exposures([group(rule(UserIdGroupPairs=[{"GroupId": "sg-desktops"}]))]) == [
        "sg-desktops lets the desktops' own group sg-desktops reach port 7000"
    ]
    private = {"IpRanges": [{"CidrIp": "10.0.0.0/8"}, {"CidrIp": "192.168.4.0/24"}]}
    assert exposures([group(rule(**private), rule(UserIdGroupPairs=[{"GroupId": "sg-w"}]))]) == []
    assert exposures([group(rule("udp", **everyone), rule(ports=(22, 22), **everyone))]) == []
    assert exposures([group(rule(IpRanges=[{"CidrIp": "172.16.0.0/11"}]))]) == [
        "sg-desktops lets 172.16.0.0/11 reach port 7000"  # wider than 172.16.0.0/12
    ]
    subnet = ["10.0.1.0/24", "2600:1f18::/64"]
    assert exposures([group(rule(IpRanges=[{"CidrIp": "10.0.0.0/16"}]))], subnet) == [
        "sg-desktops lets 10.0.0.0/16 (which holds the desktops' subnet 10.0.1.0/24) "
        "reach port 7000"
    ]
    assert exposures([group(rule(IpRanges=[{"CidrIp": "10.0.2.0/24"}]))], subnet) == []


def test_a_start_needs_a_subnet_and_security_groups(ec2, spec, settings):
    settings.TANDEM_AWS_SECURITY_GROUP_IDS = []
    with pytest.raises(DesktopError, match="needs TANDEM_AWS_SUBNET_ID and TANDEM_AWS_SECURITY"):
        AwsProvider().run_instance(spec)
    assert instances_of(ec2, spec.desktop_id) == []


def test_a_desktop_without_a_strong_agent_key_is_not_started(ec2, spec):
    for key in ("", "short"):
        with pytest.raises(DesktopError, match="has no agent key of 32 characters or more"):
            AwsProvider().run_instance(replace(spec, agent_key=key))
    assert instances_of(ec2, spec.desktop_id) == []


def test_the_agent_refuses_to_start_without_a_strong_key(spec):
    config = desktop_image.agent_config(replace(spec, agent_key=""))
    started = subprocess.run(
        [sys.executable, "-s", "-P", "-m", "vm_pool.agent", "--config", "-"],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0
    assert "the agent key must have at least 32 characters" in started.stderr


def test_the_agent_answers_on_tcp_only_to_its_key(spec, tmp_path):
    fields = {
        **desktop_image.agent_config(spec),
        "listen": "127.0.0.1:0",
        "work_dir": str(tmp_path),
    }
    config = AgentConfig(**fields)
    server = serve(config.listen, make_handler(Desktop(config)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:

        def status(key: str | None) -> int:
            headers = {} if key is None else {"X-Tandem-Agent-Key": key}
            request = urllib.request.Request(f"http://127.0.0.1:{port}/nothing", headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    return response.status
            except urllib.error.HTTPError as error:
                return error.code

        assert status(None) == 401
        assert status("") == 401
        assert status("0" * 32) == 401
        assert status(spec.agent_key + "0") == 401
        assert status("\u00e9" * 32) == 401  # not ASCII: refused, not a crash of the handler
        assert status(spec.agent_key) == 404  # past the key: there is no such endpoint
    finally:
        server.shutdown()
        server.server_close()


def test_the_providers_client_sends_the_desktops_key(spec):
    seen: list[str | None] = []

    class Agent(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("X-Tandem-Agent-Key"))
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Agent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        endpoint = Endpoint("i-1", "127.0.0.1", 5900, spec.screen, control_address=address)
        control = AwsProvider().control(spec, endpoint)
        assert control.health().ok
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [spec.agent_key]
