"""The ``aws`` provider: each desktop is an EC2 instance of a desktop AMI.

The AMI carries what the desktop image carries (``deploy/desktop.Dockerfile``: the desktop's
user with uid 1000 and its HOME, ``vm_pool`` and the agent's Python environment under
``/opt/tandem``, the desktop programs) plus cloud-init, systemd and iptables. The instance's
user-data is a shell script run as root at first boot: it writes the agent's config, which
holds the desktop's secrets, keeps the desktop's user away from the instance metadata service
(which hands that same user-data to any local process that asks), and starts the agent as a
systemd unit running as the desktop's user.

Only the platform may reach a desktop's agent (port 7000) and view-only VNC server (5900), and
the agent must know it is the platform:

- an instance runs in ``TANDEM_AWS_SUBNET_ID`` (required) with no public address, whatever the
  subnet's default: it is reached at its private address only;
- its security groups, ``TANDEM_AWS_SECURITY_GROUP_IDS`` (required), must let only the desktop
  workers and websockify reach those ports. They are read before every start, which is refused
  while a rule opens a port to an address outside the private ranges (``0.0.0.0/0`` above all),
  to a prefix list (whose addresses cannot be told from here), to the desktops' own groups, or
  to a range that overlaps the desktops' own subnet (in both cases one desktop's programs
  would reach another's agent and screen: a VPC-wide ``10.0.0.0/16`` rule is refused, a rule
  for the workers' own subnet is not). Egress is not checked: a desktop's way out is the
  subnet's routing (no internet gateway or NAT for a private subnet);
- the agent refuses every request without the desktop's agent key (``vm_pool.agent``), a secret
  the pool makes for each desktop and makes anew at each reset (``vm_pool.pool``). The key
  travels only in the user-data and in the client's requests: never in a tag, an argument, a
  log or an API answer.

Tags name the desktop and the host that owns it, so that an instance whose id was never
recorded is still found and terminated.

A start returns once the instance runs and its agent answers, or terminates the instance and
fails after ``TANDEM_AWS_START_TIMEOUT``. A reset terminates the instance and runs a new one
from the AMI: a fresh HOME and new secrets, at the cost of a boot. A production deployment
would rather keep the instance and restore its root volume from a snapshot of the AMI
(EC2's ReplaceRootVolume), then start the agent with the new config.

Tested against moto's EC2 server (a real HTTP API): the instance run from the AMI with its type,
subnet, security groups, key and tags and no public address, security groups refused, the
user-data and the config in it, health of an instance whose agent does not answer, start giving
up, reset and stop terminating, unknown AMIs; and the agent's key on both ends over TCP. Not
tested: an AMI booting, cloud-init running the user-data, the metadata fence, the agent
answering at an instance's private address (so a start that succeeds), EC2's timings and
eventual consistency.
"""

import json
import shlex
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from ipaddress import ip_network
from typing import Any, ClassVar

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from django.conf import settings

from vm_pool.agent.server import MIN_KEY_CHARS
from vm_pool.agent_client import AgentClient
from vm_pool.desktop import DesktopError, DesktopSpec, Endpoint, Health
from vm_pool.providers import desktop_image
from vm_pool.providers.base import DesktopProvider

TAG_DESKTOP = "tandem:desktop"
TAG_HOST = "tandem:host"
NOT_TERMINATED = ["pending", "running", "stopping", "stopped"]
POLL_SECONDS = 2.0
METADATA_ADDRESS = "169.254.169.254"
HEREDOC_END = "TANDEM_AGENT_CONFIG"
DESKTOP_PORTS = (desktop_image.CONTROL_PORT, desktop_image.VNC_PORT)
# The platform's private network: where a security group may let a desktop's ports be reached
# from (RFC 1918 and IPv6 unique local addresses).
PRIVATE_NETWORKS = tuple(
    ip_network(block) for block in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)


def user_data(spec: DesktopSpec) -> str:
    """The first-boot script: write the agent's config, fence off metadata, start the agent."""
    image = desktop_image
    agent = " ".join(shlex.quote(word) for word in image.AGENT_COMMAND)
    # json.dumps writes one line, so the quoted here-document ends only at its own marker.
    return "\n".join(
        [
            "#!/bin/sh",
            "set -eu",
            "umask 077",
            f"cat > {image.CONFIG_PATH} <<'{HEREDOC_END}'",
            json.dumps(image.agent_config(spec)),
            HEREDOC_END,
            f"chown {image.USER}:{image.USER} {image.CONFIG_PATH}",
            f"iptables -I OUTPUT -d {METADATA_ADDRESS} -m owner --uid-owner {image.USER} -j REJECT",
            f"systemd-run --unit=tandem-agent --uid={image.USER} --gid={image.USER}"
            f" --working-directory={image.APP_DIR} --setenv=PYTHONPATH={image.APP_DIR} {agent}",
            "",
        ]
    )


def exposures(groups: list[dict[str, Any]], desktop_networks: Sequence[str] = ()) -> list[str]:
    """What in these security groups (as EC2 describes them) lets anyone but the platform's
    private network, outside ``desktop_networks`` (the desktops' subnet), reach a desktop's
    agent or VNC port; nothing when they are safe."""
    own = {group["GroupId"] for group in groups}
    desktops = [ip_network(network, strict=False) for network in desktop_networks]
    found = []
    for group in groups:
        for rule in group.get("IpPermissions", []):
            ports = [port for port in DESKTOP_PORTS if _opens(rule, port)]
            if not ports:
                continue
            sources = [r["CidrIp"] for r in rule.get("IpRanges", [])]
            sources += [r["CidrIpv6"] for r in rule.get("Ipv6Ranges", [])]
            outsiders = [source for source in sources if not _private(source)]
            outsiders += [
                f"{source} (which holds the desktops' subnet {desktop})"
                for source in sources
                if _private(source)
                for desktop in desktops
                if ip_network(source, strict=False).overlaps(desktop)  # type: ignore[arg-type]
            ]
            outsiders += [f"prefix list {p['PrefixListId']}" for p in rule.get("PrefixListIds", [])]
            outsiders += [
                f"the desktops' own group {pair['GroupId']}"
                for pair in rule.get("UserIdGroupPairs", [])
                if pair.get("GroupId") in own
            ]
            found += [
                f"{group['GroupId']} lets {who} reach port {port}"
                for who in outsiders
                for port in ports
            ]
    return found


def _opens(rule: dict[str, Any], port: int) -> bool:
    if rule["IpProtocol"] == "-1":  # all traffic
        return True
    if rule["IpProtocol"] not in ("tcp", "6"):
        return False
    return bool(rule.get("FromPort", 0) <= port <= rule.get("ToPort", 65535))


def _private(cidr: str) -> bool:
    network = ip_network(cidr, strict=False)
    first, last = network.network_address, network.broadcast_address
    return any(first in private and last in private for private in PRIVATE_NETWORKS)


def _tags(spec: DesktopSpec) -> list[dict[str, str]]:
    return [
        {"Key": "Name", "Value": f"tandem-desktop-{spec.desktop_id}"},
        {"Key": TAG_DESKTOP, "Value": str(spec.desktop_id)},
        {"Key": TAG_HOST, "Value": settings.TANDEM_HOST},
    ]


def _endpoint(instance: dict[str, Any], spec: DesktopSpec) -> Endpoint:
    address = instance["PrivateIpAddress"]
    return Endpoint(
        instance_id=instance["InstanceId"],
        vnc_host=address,
        vnc_port=desktop_image.VNC_PORT,
        screen=spec.screen,
        control_address=f"{address}:{desktop_image.CONTROL_PORT}",
    )


@contextmanager
def _ec2_errors(doing: str) -> Iterator[None]:
    try:
        yield
    except ClientError as error:
        detail = error.response.get("Error", {})
        raise DesktopError(
            f"EC2 refused to {doing}: {detail.get('Code', '?')}: {detail.get('Message', error)}"
        ) from error
    except BotoCoreError as error:
        raise DesktopError(f"could not {doing} on EC2: {error}") from error


def _not_found(error: DesktopError) -> bool:
    cause = error.__cause__
    return (
        isinstance(cause, ClientError)
        and cause.response.get("Error", {}).get("Code") == "InvalidInstanceID.NotFound"
    )


class AwsProvider(DesktopProvider):
    name = "aws"
    # Actions, programs and files go through the agent; HOME is restored by a new instance.
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"view_only_vnc", "home_restore", "launch", "run", "files"}
    )

    def __init__(self) -> None:
        self._ec2: Any = None

    def _client(self) -> Any:
        if self._ec2 is None:
            self._ec2 = boto3.client(
                "ec2",
                region_name=settings.TANDEM_AWS_REGION,
                endpoint_url=settings.TANDEM_AWS_ENDPOINT_URL or None,
            )
        return self._ec2

    def start(self, spec: DesktopSpec) -> Endpoint:
        deadline = time.monotonic() + settings.TANDEM_AWS_START_TIMEOUT
        endpoint = self.run_instance(spec, deadline)
        try:
            self._wait_for_agent(spec, endpoint, deadline)
        except BaseException:
            self._terminate(endpoint.instance_id)
            raise
        return endpoint

    def run_instance(self, spec: DesktopSpec, deadline: float | None = None) -> Endpoint:
        """Run the desktop's instance and wait until it runs with a private address.

        The first half of ``start``: the agent is not waited for.
        """
        if not spec.image:
            raise DesktopError("the template names no AMI: set its image to an AMI id")
        if spec.home_template is not None:
            raise DesktopError(
                "the aws provider takes HOME from the AMI; bake the template's home_template "
                "into the AMI and leave the field empty"
            )
        if len(spec.agent_key) < MIN_KEY_CHARS:
            raise DesktopError(
                f"desktop {spec.desktop_id} has no agent key of {MIN_KEY_CHARS} characters or more"
            )
        subnet, groups = settings.TANDEM_AWS_SUBNET_ID, settings.TANDEM_AWS_SECURITY_GROUP_IDS
        if not subnet or not groups:
            raise DesktopError(
                "the aws provider needs TANDEM_AWS_SUBNET_ID and TANDEM_AWS_SECURITY_GROUP_IDS: "
                "a private subnet, and security groups that let only the desktop workers and "
                f"websockify reach ports {DESKTOP_PORTS[0]} and {DESKTOP_PORTS[1]}"
            )
        self._check_security_groups(groups, subnet)
        if deadline is None:
            deadline = time.monotonic() + settings.TANDEM_AWS_START_TIMEOUT
        request: dict[str, Any] = {
            "ImageId": spec.image,
            "InstanceType": settings.TANDEM_AWS_INSTANCE_TYPE,
            "MinCount": 1,
            "MaxCount": 1,
            "NetworkInterfaces": [
                {
                    "DeviceIndex": 0,
                    "SubnetId": subnet,
                    "Groups": groups,
                    # Never a public address, whatever the subnet gives its instances.
                    "AssociatePublicIpAddress": False,
                    "DeleteOnTermination": True,
                }
            ],
            "UserData": user_data(spec),
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": _tags(spec)},
                {"ResourceType": "volume", "Tags": _tags(spec)},
            ],
            "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1},
            "InstanceInitiatedShutdownBehavior": "terminate",
        }
        if settings.TANDEM_AWS_KEY_NAME:
            request["KeyName"] = settings.TANDEM_AWS_KEY_NAME
        with _ec2_errors(f"run an instance of {spec.image}"):
            instance_id = self._client().run_instances(**request)["Instances"][0]["InstanceId"]
        try:
            return self._wait_until_running(spec, instance_id, deadline)
        except BaseException:
            self._terminate(instance_id)
            raise

    def _check_security_groups(self, group_ids: list[str], subnet_id: str) -> None:
        with _ec2_errors(f"describe security groups {', '.join(group_ids)}"):
            groups = self._client().describe_security_groups(GroupIds=group_ids)
        with _ec2_errors(f"describe subnet {subnet_id}"):
            (subnet,) = self._client().describe_subnets(SubnetIds=[subnet_id])["Subnets"]
        networks = [subnet["CidrBlock"]] + [
            block["Ipv6CidrBlock"] for block in subnet.get("Ipv6CidrBlockAssociationSet", [])
        ]
        found = exposures(groups["SecurityGroups"], networks)
        if found:
            raise DesktopError(
                "the desktops' security groups let more than the platform's private network "
                "in: " + "; ".join(found)
            )

    def _wait_until_running(self, spec: DesktopSpec, instance_id: str, deadline: float) -> Endpoint:
        while True:
            try:
                instance = self._describe(instance_id)
            except DesktopError as error:
                if not _not_found(error):  # a new instance may not be visible at once
                    raise
                instance = None
            if instance is not None:
                state = instance["State"]["Name"]
                if state == "running" and instance.get("PrivateIpAddress"):
                    return _endpoint(instance, spec)
                if state not in ("pending", "running"):
                    reason = instance.get("StateReason", {}).get("Message", "")
                    raise DesktopError(f"instance {instance_id} is {state} at start: {reason}")
            if time.monotonic() > deadline:
                raise DesktopError(f"instance {instance_id} was not running in time")
            time.sleep(POLL_SECONDS)

    def _wait_for_agent(self, spec: DesktopSpec, endpoint: Endpoint, deadline: float) -> None:
        agent = AgentClient(endpoint.control_address, spec.agent_key, spec.screen)
        while True:
            health = agent.health(timeout=POLL_SECONDS)
            if health.ok:
                return
            if time.monotonic() > deadline:
                raise DesktopError(
                    f"desktop {spec.desktop_id}: instance {endpoint.instance_id} runs but its "
                    f"agent did not answer in {settings.TANDEM_AWS_START_TIMEOUT}s: "
                    f"{health.reason}"
                )
            time.sleep(POLL_SECONDS)

    def _describe(self, instance_id: str) -> dict[str, Any]:
        with _ec2_errors(f"describe instance {instance_id}"):
            answer = self._client().describe_instances(InstanceIds=[instance_id])
        return answer["Reservations"][0]["Instances"][0]

    def reset(self, spec: DesktopSpec) -> Endpoint:
        self.stop(spec)
        return self.start(spec)

    def health(self, spec: DesktopSpec) -> Health:
        if not spec.instance_id:
            return Health(False, "no instance recorded for this desktop")
        try:
            instance = self._describe(spec.instance_id)
        except DesktopError as error:
            if _not_found(error):
                return Health(False, f"instance {spec.instance_id} is gone")
            return Health(False, str(error))
        state = instance["State"]["Name"]
        if state != "running":
            return Health(False, f"instance {spec.instance_id} is {state}")
        endpoint = _endpoint(instance, spec)
        health = AgentClient(endpoint.control_address, spec.agent_key, spec.screen).health()
        if health.ok:
            return health
        return Health(
            False,
            f"instance {spec.instance_id} is running but its agent at "
            f"{endpoint.control_address} is not healthy: {health.reason}",
        )

    def stop(self, spec: DesktopSpec) -> None:
        filters = [
            {"Name": f"tag:{TAG_DESKTOP}", "Values": [str(spec.desktop_id)]},
            {"Name": f"tag:{TAG_HOST}", "Values": [settings.TANDEM_HOST]},
            {"Name": "instance-state-name", "Values": NOT_TERMINATED},
        ]
        with _ec2_errors(f"find the instances of desktop {spec.desktop_id}"):
            pages = self._client().get_paginator("describe_instances").paginate(Filters=filters)
            ids = {
                instance["InstanceId"]
                for page in pages
                for reservation in page["Reservations"]
                for instance in reservation["Instances"]
            }
        recorded = spec.instance_id
        if recorded and recorded not in ids and self._not_terminated(recorded):
            ids.add(recorded)
        for instance_id in sorted(ids):
            try:
                with _ec2_errors(f"terminate instance {instance_id}"):
                    self._client().terminate_instances(InstanceIds=[instance_id])
            except DesktopError as error:
                if not _not_found(error):
                    raise

    def _not_terminated(self, instance_id: str) -> bool:
        """Whether an instance is yet to be terminated: one already terminating is left alone
        (its network interface, deleted with it, may be gone already)."""
        try:
            return self._describe(instance_id)["State"]["Name"] in NOT_TERMINATED
        except DesktopError as error:
            if _not_found(error):
                return False
            raise

    def _terminate(self, instance_id: str) -> None:
        """Clean up after a failed start; the start's own error is the one to report."""
        with suppress(ClientError, BotoCoreError):
            self._client().terminate_instances(InstanceIds=[instance_id])

    def control(self, spec: DesktopSpec, endpoint: Endpoint) -> AgentClient:
        return AgentClient(endpoint.control_address, spec.agent_key, spec.screen)
