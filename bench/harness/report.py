"""Ratios, tables and the chart of bench/run_all.py's results (driver side).

A run (one thread count) holds rows {framework, mode, case, status,
median_us, best_us, ...}; add_ratios adds, for each case, the roofline bound
and the fastest framework that is not kiln, and for each kiln row three
ratios of medians: to PyTorch eager (its grad-recording row for kiln's),
to the fastest other framework, and to the roofline bound (all >= 1 for the
bound; below 1 elsewhere: kiln is faster)."""
from harness import frameworks as fw
from harness import machine

RATIOS = (("vs_torch_eager", "kiln / PyTorch eager"),
          ("vs_fastest_other", "kiln / fastest other framework"),
          ("vs_roofline", "kiln / roofline bound"))


def _rows_by_key(run):
    return {(r["framework"], r["mode"], r["case"]): r for r in run["rows"]}


def add_ratios(run, cases, frameworks):
    rows = _rows_by_key(run)
    run["cases"] = {}
    kiln_names = {f.name for f in frameworks if f.kiln}
    for case in cases:
        timed = [r for r in run["rows"] if r["case"] == case.id and "median_us" in r]
        others = [r for r in timed if r["framework"] not in kiln_names]
        fastest = min(others, key=lambda r: r["median_us"], default=None)
        info = {"roofline": machine.roofline(case, run["machine"]),
                "fastest_other": None if fastest is None else {
                    "framework": fastest["framework"], "mode": fastest["mode"],
                    "label": label_of(fastest["framework"], fastest["mode"]),
                    "median_us": fastest["median_us"]}}
        run["cases"][case.id] = info
        for row in timed:
            if row["framework"] not in kiln_names:
                continue
            base_key = fw.BASELINE_GRAD if row["mode"] == "eager-grad" else fw.BASELINE
            base = rows.get((*base_key, case.id), {}).get("median_us")
            row["ratios"] = {
                "vs_torch_eager": row["median_us"] / base if base else None,
                "vs_fastest_other": row["median_us"] / fastest["median_us"] if fastest else None,
                "vs_roofline": (row["median_us"] / info["roofline"]["bound_us"]
                                if info["roofline"] else None)}


def label_of(framework_name, mode_id):
    if mode_id == "*":  # a row that stands for all of a framework's modes
        return fw.FRAMEWORKS_BY_NAME[framework_name].label
    for id, label, _ in fw.FRAMEWORKS_BY_NAME[framework_name].modes:
        if id == mode_id:
            return label
    return f"{framework_name} {mode_id}"


def _number(us):
    if us < 10:
        return f"{us:.2f}"
    return f"{us:.1f}" if us < 1000 else f"{us:.0f}"


def _ratio(value):
    if value is None:
        return "–"
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _short_status(status):
    for prefix, short in (("output mismatch", "mismatch"), ("not installed", "not installed"),
                          ("not available", "n/a"), ("n/a", "n/a"), ("runner", "failed"),
                          ("failed", "failed"), ("skipped", "skipped")):
        if status.startswith(prefix):
            return short
    return "?"


class Footnotes:
    """Numbered reasons, each text once."""

    def __init__(self):
        self.texts = []

    def mark(self, text):
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"

    def print(self):
        for i, text in enumerate(self.texts, 1):
            print(f"[{i}] {text}")


def _table(header, lines):
    print("| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for line in lines:
        print("| " + " | ".join(line) + " |")
    print()


def _case_header(cases):
    return [c.title.replace(" (inference)", "").replace(" (train step)", " train")
            for c in cases]


def print_tables(run, results, cases, frameworks):
    threads = run["threads"]
    m, host = run["machine"], results["machine"]
    versions = {}
    for info in run["frameworks"].values():
        versions.update(info.get("versions", {}))
    bandwidth = ", ".join(f"{lv.upper()} {gbs:.0f}" for lv, gbs in m.get("read_gbs", {}).items())
    print(f"\n## {threads} thread{'s' if threads > 1 else ''}: µs per call, median of "
          f"{results['settings']['repeats']} repetitions\n")
    print(f"Machine: {host['cpu']}, {host['logical_cpus']} logical CPUs; FP32 peak "
          + (f"{m['fp32_peak_gflops']:.0f} GFLOP/s" if m.get("fp32_peak_gflops") else "n/a")
          + (f"; read GB/s: {bandwidth}" if bandwidth else "") + ".")
    print("Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + "\n")

    rows, notes = _rows_by_key(run), Footnotes()
    lines = []
    for framework in frameworks:
        for mode_id, label, _applies in framework.modes:
            line = [label]
            for case in cases:
                row = rows.get((framework.name, mode_id, case.id))
                if row is None:
                    row = rows.get((framework.name, "*", case.id))
                if row is None:
                    line.append("–")
                elif "median_us" in row:
                    line.append(_number(row["median_us"]))
                else:
                    status = row["status"]
                    line.append(f"{_short_status(status)} "
                                + notes.mark(f"{framework.label}: {status}"))
            lines.append(line)
    _table(["mode"] + _case_header(cases), lines)
    print("Inference: eval mode, no gradient recording unless the row says (grad). Training "
          "step: kiln hybridize(), torch.jit.* and torch.compile compile the model (backward "
          "and SGD update run as usual); kiln.compile(step), tf.function, jax.jit and TinyJit "
          "compile the whole step. Only outputs equal to PyTorch eager's are timed.\n")
    notes.print()
    _print_calls(run, cases)
    _print_ratios(run, cases, frameworks)
    _print_roofline(run, cases)


def _print_calls(run, cases):
    """Where repetitions were shortened, say so."""
    short = []
    for case in cases:
        calls = [r["calls"] for r in run["rows"] if r["case"] == case.id and r.get("calls")]
        if calls and min(calls) < max(c for c in calls):
            short.append(f"{case.id} {min(calls)}-{max(calls)}")
        elif calls:
            short.append(f"{case.id} {calls[0]}")
    if short:
        print("\nCalls per repetition (fewer where one repetition would pass ~0.2 s at "
              "batch > 1, ~1 s at batch 1): " + "; ".join(short) + "\n")


def _print_ratios(run, cases, frameworks):
    if not any(f.kiln for f in frameworks):
        return
    print("kiln's medians as ratios (below 1: kiln is faster): to PyTorch eager / to the "
          "fastest other framework / to the roofline bound\n")
    rows = _rows_by_key(run)
    lines = []
    for framework in (f for f in frameworks if f.kiln):
        for mode_id, label, _ in framework.modes:
            line = [label]
            for case in cases:
                ratios = rows.get((framework.name, mode_id, case.id), {}).get("ratios")
                if not ratios:
                    line.append("–")
                    continue
                line.append(" / ".join(_ratio(ratios[k]) for k, _ in RATIOS))
            lines.append(line)
    _table(["kiln mode"] + _case_header(cases), lines)


def _print_roofline(run, cases):
    lines = []
    for case in cases:
        info = run["cases"][case.id]
        bound, fastest = info["roofline"], info["fastest_other"]
        if bound:
            bound_text = [f"{bound['bound_us']:.3g}", bound["bound_by"],
                          f"{bound['flops'] / 1e6:.3g}", f"{bound['bytes'] / 1e6:.3g}"]
        else:
            bound_text = ["n/a", "machine not measured", "", ""]
        fastest_text = (f"{fastest['label']} {_number(fastest['median_us'])}" if fastest
                        else "none timed")
        lines.append([case.title, *bound_text, fastest_text])
    print("Roofline bound per call: max(flops / FP32 peak, bytes / read bandwidth of the level "
          "the working set fits in, the share held by faster levels read at theirs); flops "
          "count linear and conv multiply-adds (x2; x3 for a training step) and the SGD "
          "update, bytes each parameter and activation moved once per use "
          "(bench/harness/workloads.py: cost_of; bench/harness/machine.py: roofline).\n")
    _table(["case", "bound µs", "bound by", "MFLOP", "MB", "fastest other, µs"], lines)


def write_chart(results, cases, frameworks, path):
    """A PNG of kiln's ratios; None, or why it could not be drawn."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError as e:
        return f"matplotlib not importable ({e})"
    runs = results["runs"]
    kiln_modes = [(f.name, id, label) for f in frameworks if f.kiln for id, label, _ in f.modes]
    if not runs or not kiln_modes:
        return "no kiln rows"
    fig, axes = plt.subplots(len(RATIOS), len(runs), figsize=(7 * len(runs), 3.6 * len(RATIOS)),
                             squeeze=False)
    width = 0.8 / len(kiln_modes)
    colors = plt.get_cmap("tab10").colors
    for col, run in enumerate(runs):
        rows = _rows_by_key(run)
        for row_index, (key, title) in enumerate(RATIOS):
            ax = axes[row_index][col]
            for i, (name, mode_id, _label) in enumerate(kiln_modes):
                values = [rows.get((name, mode_id, c.id), {}).get("ratios", {}).get(key)
                          for c in cases]
                xs = [j + (i - len(kiln_modes) / 2 + 0.5) * width for j in range(len(cases))]
                # A color per mode, the same in every panel, timed or not.
                ax.bar([x for x, v in zip(xs, values) if v], [v for v in values if v], width,
                       color=colors[i % len(colors)])
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.set_yscale("log")
            ax.set_xticks(range(len(cases)))
            ax.set_xticklabels([c.id for c in cases], rotation=30, fontsize=8)
            ax.set_title(f"{title}, {run['threads']} thread(s)", fontsize=10)
    timed = {(r["framework"], r["mode"]) for run in runs for r in run["rows"] if r.get("ratios")}
    handles = [Patch(color=colors[i % len(colors)],
                     label=label if (name, mode_id) in timed else f"{label} (not timed)")
               for i, (name, mode_id, label) in enumerate(kiln_modes)]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8)
    fig.suptitle(f"kiln's time per call as a ratio (log scale; below 1: kiln is faster)\n"
                 f"{results['machine']['cpu']}, {results['machine']['logical_cpus']} logical CPUs",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return None
