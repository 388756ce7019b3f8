import subprocess
import sys
from pathlib import Path

import pytest

from panewatch.engine import Engine, EngineOptions
from panewatch.manifest import ManifestStore, bundled_manifest_dir

# test helpers (scripted agents, servers) live next to the tests
sys.path.insert(0, str(Path(__file__).parent))

# every test has one layer (unit, integration, browser, live, bench); unit tests are held to theirs
pytest_plugins = ["layers"]


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path_factory, monkeypatch):
    """Every server a test starts keeps its state (tmux socket, registry, token) in a folder of
    its own, never the user's, and its tmux server is ended afterwards."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("PANEWATCH_STATE_DIR", str(state))
    yield state
    sock = state / "tmux.sock"
    if sock.exists():
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, check=False)


@pytest.fixture
async def engine():
    """A started engine on the pty host, with the bundled manifests and a fast sweep."""
    eng = Engine(ManifestStore.from_dirs(bundled_manifest_dir()), options=EngineOptions(sweep_ms=50))
    await eng.start()
    yield eng
    await eng.stop()


# --- the dashboard's browser tests (a module that asks for these defines its own ``server``) ----


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, shared by a browser test module's tests (each opens its own
    context)."""
    from browser_support import chromium

    with chromium() as b:
        yield b


@pytest.fixture
def page(request, browser, server):
    """The dashboard of the module's ``server`` in a fresh context (in the layout the module's
    ``DASHBOARD_LAYOUT`` names, if any); afterwards its sessions are deleted and the page must
    have logged no error."""
    from browser_support import open_dashboard

    context, page, errors = open_dashboard(browser, server, layout=getattr(request.module, "DASHBOARD_LAYOUT", None))
    yield page
    context.close()
    server.delete_all()
    assert errors == [], f"errors in the page's console: {errors}"
