"""Container desktops on a real engine: podman's Docker-compatible API here
(``tests.support.engine`` starts it), the desktop image built by ``make desktop-image``.

A container desktop starts, answers, is driven and observed the way a local one is (XTEST and
XShm through its X socket, programs and files through its agent); a document a task's setup
opens is on the first observation; an image that is missing and a container that dies are each
a clear ``DesktopError``, and the pool marks such a desktop broken (an engine that does not
answer: tests/vm_pool/test_provider_docker.py).
"""

import base64
import io
import re
import zipfile

import docker
import pytest
from django.conf import settings
from django.core.files.storage import default_storage

from annotation.episodes import loop
from annotation.models import Project, Step, Task
from backend.accounts.roles import Role
from model_serving.proposers.baseline import BaselineProposer
from vm_pool import pool
from vm_pool.actions import Action, ActionType, Point, ScreenSize
from vm_pool.desktop import DesktopError
from vm_pool.models import Desktop, DesktopStatus, DesktopTemplate
from vm_pool.sandbox.activity import wait_until_idle

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("container_desktops"),
]

PNG = b"\x89PNG"


@pytest.fixture
def template() -> DesktopTemplate:
    return DesktopTemplate.objects.create(
        name="containers", provider="docker", width=1024, height=768, min_ready=0
    )


def started(template: DesktopTemplate) -> Desktop:
    desktop = pool.start_desktop(pool.create_desktop(template, settings.TANDEM_HOST).pk)
    assert desktop.status == DesktopStatus.READY, desktop.broken_reason
    return desktop


def pointer(control) -> tuple[int, int]:
    reply = control.run(["xdotool", "getmouselocation", "--shell"], timeout=10)
    fields = dict(line.split("=", 1) for line in reply.output.split())
    return int(fields["X"]), int(fields["Y"])


def test_a_container_desktop_is_driven_and_observed_like_a_local_one(template):
    desktop = started(template)
    control = pool.control_for(desktop)
    observation = control.observe(settle=True)
    assert observation.png.startswith(PNG) and observation.screen == ScreenSize(1024, 768)
    control.execute(Action(ActionType.CLICK, Point(300, 200)))
    assert pointer(control) == (300, 200)
    whoami = control.run(["sh", "-c", "id -un; echo $HOME; pwd"], timeout=10)
    assert whoami.output.split() == ["user", "/home/user", "/home/user"]
    # The container's processes are accounted in its own cgroup (``vm_pool.sandbox.activity``):
    # idle at rest, busy while a program of it works (two seconds of CPU).
    activity = control.activity()
    assert activity is not None and wait_until_idle(activity, 5) is not None
    busy = "import time\nend = time.process_time() + 2\nwhile time.process_time() < end: pass"
    control.launch(["python3", "-c", busy])
    assert wait_until_idle(activity, 1) is None
    assert wait_until_idle(activity, 10) is not None  # once it is done


MANIFEST = """<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"
  manifest:version="1.2">
 <manifest:file-entry manifest:full-path="/"
   manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/>
 <manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
</manifest:manifest>
"""
CONTENT = """<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
  xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0"
  xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
  xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"
  xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">
 <office:automatic-styles>
  <style:style style:name="wide" style:family="table-column">
   <style:table-column-properties style:column-width="8cm"/>
  </style:style>
  <style:style style:name="big" style:family="table-cell">
   <style:text-properties fo:font-size="20pt"/>
  </style:style>
 </office:automatic-styles>
 <office:body><office:spreadsheet><table:table table:name="Report">
  <table:table-column table:style-name="wide"/>
  <table:table-row><table:table-cell table:style-name="big" office:value-type="string">
   <text:p>Quarterly</text:p></table:table-cell></table:table-row>
  <table:table-row><table:table-cell table:style-name="big" office:value-type="string">
   <text:p>Revenue</text:p></table:table-cell></table:table-row>
  <table:table-row><table:table-cell table:style-name="big" office:value-type="float"
   office:value="4242"><text:p>4242</text:p></table:table-cell></table:table-row>
 </table:table></office:spreadsheet></office:body></office:document-content>
"""


def report_ods() -> bytes:
    """A two-row spreadsheet in OpenDocument's packaging, as Calc saves one."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as ods:
        # The media type comes first and uncompressed: that is how the file is recognised.
        ods.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        ods.writestr("META-INF/manifest.xml", MANIFEST, compress_type=zipfile.ZIP_DEFLATED)
        ods.writestr("content.xml", CONTENT, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def test_a_calc_document_placed_by_a_setup_step_is_open_on_the_first_observation(
    loop_settings, make_user, project
):
    template = DesktopTemplate.objects.create(
        name="office", provider="docker", width=1280, height=800, min_ready=0
    )
    Project.objects.filter(pk=project.pk).update(environment_template="office")
    ann = make_user("ann", project, Role.ANNOTATOR)
    Task.objects.create(
        project=project,
        external_id="calc",
        instruction="Read the revenue",
        setup=[
            {
                "type": "file",
                "parameters": {
                    "path": "~/report.ods",
                    "content_b64": base64.b64encode(report_ods()).decode(),
                },
            },
            {"type": "open", "parameters": {"path": "~/report.ods", "window_timeout": 60}},
        ],
    )
    started(template)
    episode = loop.start_episode(ann, Project.objects.filter(pk=project.pk))
    loop.prepare_episode(episode.pk)
    episode.refresh_from_db()
    assert episode.ended_at is None, episode.end_reason

    first = Step.objects.select_related("observation").get(episode=episode, index=1)
    with default_storage.open(first.observation.file.name, "rb") as stored:
        png = stored.read()
    # The column is wide enough that no grid line or the cell cursor's frame crosses a word,
    # though OCR may still read a line beside one as a mark ("_|Revenue"): letters and digits count.
    read = BaselineProposer().read_screen(png, ScreenSize(1280, 800)).words
    words = {re.sub(r"[\W_]", "", w.text) for w in read}
    assert {"Quarterly", "Revenue", "4242"} <= words, sorted(words)
    control = pool.control_for(Desktop.objects.get(pk=episode.desktop_id))
    titles = control.run(["wmctrl", "-l"], timeout=10).output
    assert "report.ods - LibreOffice Calc" in titles, titles


def test_a_missing_image_breaks_the_desktop_and_says_how_to_build_it(template, settings):
    settings.TANDEM_DESKTOP_IMAGE = "tandem-desktop:no-such-tag"
    desktop = pool.start_desktop(pool.create_desktop(template, settings.TANDEM_HOST).pk)
    assert desktop.status == DesktopStatus.BROKEN
    assert "no image" in desktop.broken_reason and "make desktop-image" in desktop.broken_reason


def test_a_container_that_dies_is_a_desktop_error_and_is_marked_broken(template, engine_url):
    desktop = started(template)
    control = pool.control_for(desktop)
    control.observe(settle=False)
    docker.DockerClient(base_url=engine_url).containers.get(desktop.instance_id).kill()

    with pytest.raises(DesktopError):  # its X server went with it: the step fails, clearly
        pool.control_for(desktop).execute(Action(ActionType.CLICK, Point(10, 10)))
    assert pool.check_health(settings.TANDEM_HOST) == [desktop.pk]
    desktop.refresh_from_db()
    assert desktop.status == DesktopStatus.BROKEN and "health check failed" in desktop.broken_reason
