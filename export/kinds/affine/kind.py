"""The affine kind: linear prefixes of a `FittedSequence`, each an affine map of the groups computed so far.

`KIND` is what the registry (`edgeseq.export.kinds`) hands the spine. Everything it names lives in this
folder: the export writer (`writer._write_all`: graphs of `onnx.build_prefix_graph`, manifest and C), the
float C tables (`c_float.write_c_model`), the int16 quantisation and C tables (`quantize.quantize_sequence`,
`c_int16.write_c_int16_model`), the read-back (`reader.sequence_from_export`) and the verify reference
(`verify.verify_affine_export`).

Examples
--------
>>> from edgeseq.export.kinds.affine.kind import KIND
>>> KIND.name, KIND.noun, KIND.form.__name__
('affine', 'prefix', 'FittedSequence')
"""

from __future__ import annotations

from edgeseq.export.kinds import ExportRequest, StageKind
from edgeseq.forms.linear import FittedSequence


def _check(form) -> None:
    from edgeseq.export.kinds.affine.writer import check_float32

    FittedSequence.validate(form)  # through the class: an instance cannot bring its own
    check_float32(form)


def _writer(form, request: ExportRequest):
    from edgeseq.export.kinds.affine import c_float
    from edgeseq.export.kinds.affine.writer import _write_all

    def write_c(seq, out_dir, prefix, model_name=None):
        return c_float.write_c_model(seq, out_dir, prefix, model_name, c_link=request.c_link)

    c_int16, qm = None, None
    if request.c_dtype == "int16":
        write_c, c_int16, qm = _int16_writer(form, request)
    r = request

    def write(tmp):
        return _write_all(form, tmp, r.model_name, r.c_prefix, r.check_stats, write_c, r.batch_size, r.ort,
                          r.labels, c_int16, r.c_link)
    write.int16 = None if qm is None else (form, qm)  # what per-input stopping calibrates on
    return write


def _write_c(form, out_dir, prefix: str, model_name: str | None = None) -> list[str]:
    from edgeseq.export.kinds.affine.c_float import write_c_model

    return write_c_model(form, out_dir, prefix, model_name)


def _read_back(out_dir):
    from edgeseq.export.kinds.affine.reader import sequence_from_export

    return sequence_from_export(out_dir)


def _verify(out_dir, X=None, *, source: str = "", use_c: bool = True, require_c: bool = False,
           compiler=None):
    from edgeseq.export.kinds.affine.verify import verify_affine_export

    return verify_affine_export(out_dir, X, source=source, use_c=use_c, require_c=require_c, compiler=compiler)


def _manifest_rows(m: dict) -> list[str]:
    head = f"{'step':>4}  {'group':<20} {'input':<20} {'dim':>4} {'cost':>9} {'cum_cost':>9} " \
           f"{'f32 diff':>9}  {'file':<16} train"
    lines = [head, "-" * len(head)]
    for p in m["prefixes"]:
        j = p["index"]
        g = m["groups"][j - 1] if j else None
        train = p["metrics"]["train"]
        tm = "" if not train else ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                            for k, v in sorted(train.items()))
        lines.append(f"{j:>4}  {(g['name'] if g else '-')[:20]!s:<20} {(g['input_name'] if g else 'n')[:20]:<20} "
                     f"{(g['dim'] if g else 0):>4} {(g['cost'] if g else 0):>9.4g} {p['cum_cost']:>9.4g} "
                     f"{p['float32_max_abs_diff']:>9.2g}  {p['file']:<16} {tm}")
    return lines


def _int16_writer(seq: FittedSequence, request: ExportRequest):
    """(C writer, manifest entry, Int16Model) of the int16 model: quantised once, here, from the calibration rows."""
    from edgeseq.export.kinds.affine.c_int16 import int16_manifest_entry, write_c_int16_model
    from edgeseq.export.kinds.affine.quantize import quantize_sequence

    X, y = request.calibration_rows()
    qm = quantize_sequence(seq, X, y)
    return ((lambda s, tmp, prefix, model_name: write_c_int16_model(s, qm, tmp, prefix, model_name)),
            int16_manifest_entry(seq, qm, len(X)), qm)


def _int16_rows(form, qm, X):
    """Raw rows as the int16 C reads them: the used columns in sequence order, quantised."""
    from edgeseq.export.kinds.affine.quantize import quantize_features

    return quantize_features(qm, X[:, form.prefix_columns(form.n_groups)])


def _int16_staged(form, qm, X):
    """Per prefix, the integer model's bit-exact outputs (`quantize.simulate`)."""
    from edgeseq.export.kinds.affine.quantize import simulate

    xq = _int16_rows(form, qm, X)
    return [simulate(qm, xq, j) for j in range(form.n_prefixes)]


KIND = StageKind("affine", "prefix", FittedSequence, writer=_writer, read_back=_read_back, verify=_verify,
                 check=_check, write_c=_write_c, manifest_rows=_manifest_rows, int16_rows=_int16_rows,
                 int16_staged=_int16_staged)
