"""What ``deploy/dev.sh`` decides without touching the machine: when the container desktops'
image must be built again."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def recipe(root: Path) -> str:
    script = root / "deploy" / "dev.sh"
    done = subprocess.run(
        ["bash", str(script), "desktop-image-recipe"], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_desktop_image_is_built_again_when_the_vm_pool_it_copies_changes(tmp_path):
    """The image copies vm_pool (the agent a container desktop runs): a change there, not only
    in the Dockerfile, makes a new image; Python's caches do not."""
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    (tmp_path / "vm_pool" / "agent" / "__pycache__").mkdir(parents=True)
    agent = tmp_path / "vm_pool" / "agent" / "server.py"
    agent.write_text("print('the agent')\n")
    first = recipe(tmp_path)
    assert len(first) == 16 and recipe(tmp_path) == first

    (tmp_path / "vm_pool" / "agent" / "__pycache__" / "server.pyc").write_bytes(b"\0cache")
    assert recipe(tmp_path) == first
    agent.write_text("print('the agent, changed')\n")
    changed = recipe(tmp_path)
    assert changed != first
    (tmp_path / "deploy" / "desktop.Dockerfile").write_text("FROM scratch\n")
    assert recipe(tmp_path) not in (first, changed)
