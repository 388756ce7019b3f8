import sys
from pathlib import Path

# test helpers (scripted agents, servers) live next to the tests
sys.path.insert(0, str(Path(__file__).parent))
