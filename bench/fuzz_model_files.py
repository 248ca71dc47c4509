"""Random-mutation sweep of the model-file loader: the long version of tests/test_trust_fuzz.py.

    python bench/fuzz_model_files.py [--n 30000] [--seed 1] [--out bench/results]

Mutates valid model files (bare sequences of each link and fitted estimators, pickle protocols 2
and 5; see tests/hostile.py) with 1-4 random edits: bit flips, byte sets, insertions, deletions,
truncation, and a 4-byte "large count" splice. Each one is loaded with `load`, then
`FittedSequence.validate` runs on what loaded. Counts what loaded, what was refused with a
ModelFormatError, and anything else, which the loader promises never happens. Also records
messages that were too long or multi-line, loads slower than a second, and the process's peak
resident memory. Writes bench/results/fuzz_model_files.json with machine information.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import resource
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from edgeseq.errors import ModelFormatError  # noqa: E402
from edgeseq.io.model_io import as_sequence, loads_model  # noqa: E402
from edgeseq.forms.linear import FittedSequence  # noqa: E402


from hostile import mutate  # noqa: E402  (the same mutations as the hypothesis test)
from _results import command_line, write_result  # noqa: E402  (bench/ is on sys.path)


def seeds() -> list[bytes]:
    from test_trust_fuzz import SEEDS
    return SEEDS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = random.Random(args.seed)
    pool = seeds()
    counts = collections.Counter()
    unexpected: collections.Counter = collections.Counter()
    worst = 0.0
    t0 = time.perf_counter()
    for _ in range(args.n):
        data = mutate(rng.choice(pool), rng.randint)
        t = time.perf_counter()
        try:
            FittedSequence.validate(as_sequence(loads_model(data)))
            counts["loaded"] += 1
        except ModelFormatError as exc:
            counts["refused"] += 1
            if "\n" in str(exc) or len(str(exc)) > 600:
                counts["long_message"] += 1
        except Exception as exc:  # noqa: BLE001 - what the sweep is looking for
            counts["other"] += 1
            unexpected[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
        took = time.perf_counter() - t
        worst = max(worst, took)
        counts["slower_than_1s"] += took > 1.0
    result = {
        "n_files": args.n, "seed": args.seed,
        "loaded": counts["loaded"], "refused": counts["refused"], "other_exception": counts["other"],
        "long_or_multiline_message": counts["long_message"], "slower_than_1s": counts["slower_than_1s"],
        "slowest_load_s": worst, "total_s": time.perf_counter() - t0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "unexpected": dict(unexpected.most_common(20)),
    }
    result["tables"] = [{"title": "Randomly mutated model files: the only allowed outcomes are a valid model or "
                                  "one ModelFormatError line",
                         "columns": ["files", "loaded", "refused", "other exception", "long message",
                                     "slowest load (s)", "peak RSS (MB)"],
                         "rows": [[args.n, result["loaded"], result["refused"], result["other_exception"],
                                   result["long_or_multiline_message"], f"{worst:.3g}",
                                   f"{result['peak_rss_mb']:.0f}"]]}]
    write_result("fuzz_model_files", result, command_line())
    print(json.dumps({k: v for k, v in result.items() if k != "tables"}, indent=1))


if __name__ == "__main__":
    main()
