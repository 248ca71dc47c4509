"""One budget rule everywhere: the longest prefix with cum_cost <= budget, compared exactly.
The estimator, the exported session (batch and anytime loop), `edgeseq run` and the curves must agree,
including at budgets equal to a cumulative cost up to float rounding and at tiny cost units."""

import numpy as np
import pytest
from click.testing import CliRunner

from edgeseq import AnytimeRegressor
from edgeseq.cli import main
from edgeseq.evaluate.anytime import anytime_curve, prefix_at_budget
from edgeseq.runtime.session import AnytimeSession
from test_runtime_support import exported, group_features


@pytest.mark.parametrize("costs", [[0.1, 0.2, 0.4], [2e-13, 3e-13, 1e-13], [1.0, 1e9, 3.0]])
def test_all_parts_agree_on_the_prefix(costs, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.1 * rng.normal(size=60)
    est = AnytimeRegressor([[0], [1], [2]], costs).fit(X, y)
    seq = est.fitted_sequence_
    out = exported(seq, tmp_path)
    curve = anytime_curve(est, X, y)
    cum = seq.cum_cost
    budgets = sorted({0.0, *cum, *np.nextafter(cum, 0), *np.nextafter(cum, np.inf), 0.3, 1e-13, 5e-13})
    data = tmp_path / "x.npz"
    with AnytimeSession(out) as sess:
        feats = group_features(seq, X[:1])
        extractors = {name: (lambda _inp, v=v: v[0]) for name, v in feats.items()}
        for b in budgets:
            j = seq.prefix_for_budget(b)
            assert j == int(np.sum(cum <= b)) - 1  # the definition, written out
            assert sess.prefix_for_budget(b) == j
            assert prefix_at_budget(curve, b) == j
            assert sess.run(extractors, budget=b).prefix == j
            np.testing.assert_allclose(sess.predict(feats, budget=b), est.predict(X[:1], budget=b), rtol=1e-5,
                                       atol=1e-5)
    np.savez(data, X=X[:2])
    for b in (cum[1], cum[2], np.nextafter(cum[2], 0), cum[3]):
        res = CliRunner().invoke(main, ["run", str(out), str(data), "--budget", repr(float(b))])
        assert res.exit_code == 0, res.output
        rows = [line.split(",") for line in res.output.strip().splitlines()[1:]]
        assert [int(r[1]) for r in rows] == [seq.prefix_for_budget(float(b))] * 2
