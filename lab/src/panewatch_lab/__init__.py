"""The real-agent lab and the benchmark: a mock Anthropic API, a prepared HOME for the real CLI,
a fake agent, captures, the evaluation, and ``panewatch bench``.

Panewatch classifies what agents draw; this package produces those drawings on demand, with
ground truth beside them (the mock's request log, the fake agent's state file). It is its own
distribution (``panewatch-lab``), so the runtime wheel carries none of it.
"""

from pathlib import Path

#: Manifests of the lab's own agents (``fake``): given to a server as its extra manifest
#: folder by the lab, never offered by a production server. Package data, so found from here.
MANIFEST_DIR = Path(__file__).with_name("manifests")
