import sys
from pathlib import Path

# make tests/sequences.py importable as `sequences` from any test module
sys.path.insert(0, str(Path(__file__).resolve().parent))
