"""examples/nonlinear_options.py runs end to end: the options table, the export verified with its C
column, the Python runtime at budgets, and the C firmware demo on the tree model."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_nonlinear_options_example(tmp_path):
    pytest.importorskip("lightgbm")
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "nonlinear_options.py"), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {line[:26].strip(): line[26:].split() for line in r.stdout.splitlines()
            if line.startswith(("AFR", "LightGBM", "CS-G-OMP"))}
    assert set(rows) == {"AFR", "LightGBM, boosting order", "LightGBM, cost-sequenced", "LightGBM-CEGB",
                         "CS-G-OMP (linear)"}
    assert all(0.5 < float(t) <= 1 and 0.8 < float(a) <= 1 for t, a in rows.values())
    # the same ensemble: ordering by cost changes the timeliness, never the full-budget accuracy
    assert rows["LightGBM, boosting order"][1] == rows["LightGBM, cost-sequenced"][1]
    assert "verify: ok" in r.stdout and "Warning" not in r.stderr
    assert r.stdout.count("Python runtime, budget") == 4
    if "skipped the firmware demo" not in r.stdout:
        assert "C firmware demo: answer at tick" in r.stdout
    assert (tmp_path / "out" / "edgeseq_model.c").exists()
