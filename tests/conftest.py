import sys
from pathlib import Path

import pytest

from panewatch.manifest import ManifestStore, bundled_manifest_dir
from panewatch.runtime import Runtime

# test helpers (scripted agents, servers) live next to the tests
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
async def runtime():
    """A started runtime with the bundled manifests and a fast sweep."""
    rt = Runtime(ManifestStore.from_dirs(bundled_manifest_dir()), sweep_ms=50)
    await rt.start()
    yield rt
    await rt.stop()
