import sys
from pathlib import Path

# make tests/sequences.py importable as `sequences` from any test module
sys.path.insert(0, str(Path(__file__).resolve().parent))

# CI runs property tests with a fixed seed so that a run is reproducible (the examples still vary
# between tests); locally hypothesis explores freely. `HYPOTHESIS_PROFILE=explore` forces exploration.
import os  # noqa: E402

from hypothesis import settings  # noqa: E402

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default"))
