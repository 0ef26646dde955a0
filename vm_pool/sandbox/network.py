"""The way out of a local desktop allowed the internet: user-mode networking behind a firewall.

A desktop's network namespace has only its own loopback. For a template marked ``internet``,
slirp4netns (sandboxed itself, in the desktop's cgroups) gives the namespace a tap interface
with a NAT to the host's network, without host loopback. Before that way exists, nftables rules
in the desktop's own namespace reject every address that is not the public internet — loopback,
private, link-local (cloud metadata), shared, reserved and documentation ranges — and every
address of this host, except those ``TANDEM_SANDBOX_INTERNET_ALLOW`` names (a proxy on the
private network, say). The desktop's programs cannot change the rules: they hold no capability
in that namespace.
"""

import json
import os
import select
import subprocess
from pathlib import Path

from vm_pool.desktop import DesktopError
from vm_pool.sandbox.limits import in_cgroups

SLIRP_DNS = "10.0.2.3"
# Every IPv4 range that is not the public internet (RFC 6890 and its successors).
NOT_INTERNET = (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
    "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
)  # fmt: skip
INTERNET_READY_TIMEOUT = 10.0


def host_addresses() -> list[str]:
    """Every IPv4 address of this host's interfaces."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=False
    ).stdout
    return sorted({line.split()[3].split("/")[0] for line in out.splitlines() if len(line) > 3})


def firewall_rules(allow: list[str]) -> str:
    """nftables rules for a desktop's own network namespace: the internet only."""
    blocked = ", ".join([*NOT_INTERNET, *host_addresses()])
    allowed = f"ip daddr {{ {', '.join(allow)} }} accept" if allow else ""
    return f"""table inet tandem {{
  chain output {{
    type filter hook output priority 0; policy accept;
    oifname "lo" accept
    ip daddr {SLIRP_DNS} udp dport 53 accept
    ip daddr {SLIRP_DNS} tcp dport 53 accept
    {allowed}
    ip daddr {{ {blocked} }} reject with icmp type admin-prohibited
    meta nfproto ipv6 reject
  }}
}}
"""


def read_first_pid(info_read: int) -> int:
    """The pid bubblewrap reports on its info descriptor (it closes it once written)."""
    data = b""
    while chunk := os.read(info_read, 4096):
        data += chunk
    os.close(info_read)
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError) as error:
        raise DesktopError(f"the sandbox did not start: {data[:200]!r}") from error


def connect_internet(pid: int, cgroup_procs: list[Path], allow: list[str], log: Path) -> None:
    """Give a started sandbox (whose first process is ``pid``) a firewalled way out."""
    rules = firewall_rules(allow)
    done = subprocess.run(
        ["nsenter", f"--target={pid}", "--net", "nft", "-f", "-"],
        input=rules.encode(),
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise DesktopError(f"cannot set the desktop's firewall: {done.stderr.decode()[-300:]}")
    ready_read, ready_write = os.pipe()
    slirp = [
        "slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
        "--enable-sandbox", "--enable-seccomp", f"--ready-fd={ready_write}",
        "--netns-type=path", f"/proc/{pid}/ns/net", "tap0",
    ]  # fmt: skip
    with open(log, "ab") as out:
        subprocess.Popen(
            in_cgroups(cgroup_procs, slirp),  # it ends with the desktop's cgroups
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            pass_fds=[ready_write],
            start_new_session=True,
        )
    os.close(ready_write)
    try:
        ready = select.select([ready_read], [], [], INTERNET_READY_TIMEOUT)[0]
        if not ready or os.read(ready_read, 1) != b"1":
            raise DesktopError("user-mode networking (slirp4netns) did not come up")
    finally:
        os.close(ready_read)
