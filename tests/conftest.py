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


# ----------------------------------------------------------------------------- docstring examples
# The package's Examples sections share one preamble: "fit a toy model, export it to a temporary
# directory". It lives here once, as `toy_export` in pytest's `doctest_namespace`, which
# tests/test_docs_doctest.py hands to every doctest run (and `pytest --doctest-modules` would too).
def toy_export():
    """``(est, X, out)``: an AnytimeRegressor with groups "a" (column 0, cost 1) and "b" (columns 1-2,
    cost 2) fitted on 50 seeded normal rows with y = X @ [1, 2, 0.5], and its export in a fresh
    temporary directory `out` (a str), so no example ever writes into the working directory."""
    import tempfile

    import numpy as np

    from edgeseq import AnytimeRegressor, export_model

    X = np.random.default_rng(0).normal(size=(50, 3))
    est = AnytimeRegressor(groups=[[0], [1, 2]], costs=[1.0, 2.0], group_names=["a", "b"]).fit(X, X @ [1.0, 2.0, 0.5])
    out = tempfile.mkdtemp(prefix="edgeseq_doctest_") + "/out"
    export_model(est.fitted_sequence_, out)
    return est, X, out


def toy_prefix(j: int):
    """``(est, X, out, entry)``: `toy_export` with X as float32 (what the runtime takes), `out` as a
    Path, and the manifest's entry for prefix `j` (file, sha256, inputs), for the onnxruntime examples."""
    import json
    from pathlib import Path

    import numpy as np

    est, X, out = toy_export()
    entry = json.loads((Path(out) / "manifest.json").read_text())["prefixes"][j]
    return est, X.astype(np.float32), Path(out), entry


def toy_tree_export():
    """``(model, X, out, manifest)``: a LightGBM regression of 6 trees (y = x0 + 2 x2 on 200 seeded
    normal rows) imported with one group per column (costs 1), exported to a fresh temporary Path."""
    import tempfile
    from pathlib import Path

    import lightgbm
    import numpy as np

    from edgeseq import export_model, from_lightgbm

    X = np.random.default_rng(0).normal(size=(200, 3))
    est = lightgbm.LGBMRegressor(n_estimators=6, num_leaves=4, verbose=-1).fit(X, X[:, 0] + 2 * X[:, 2])
    model = from_lightgbm(est, groups=[[0], [1], [2]], costs=[1.0, 1.0, 1.0])
    out = Path(tempfile.mkdtemp(prefix="edgeseq_doctest_")) / "out"
    return model, X, out, export_model(model, out)


DOCTEST_NAMESPACE = {"toy_export": toy_export, "toy_prefix": toy_prefix, "toy_tree_export": toy_tree_export}

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def _doctest_fixtures(doctest_namespace):
    doctest_namespace.update(DOCTEST_NAMESPACE)
