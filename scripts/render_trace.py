"""Renders a Chrome trace that kiln.profiler exported (export_chrome_trace)
as a timeline PNG: one row per nesting depth, a bar per range, the ops that
take the most self time in colour. What docs/profiler_trace.png is made of:

    .venv/bin/python bench/profile_models.py --only rec --trace-dir /tmp/traces
    .venv/bin/python scripts/render_trace.py /tmp/traces/ch_PP-OCRv4_rec_infer.json \\
        docs/profiler_trace.png --title "PP-OCRv4 rec, one call at 1 thread"

Reads only the trace's complete ("X") events of its first thread.
"""
from __future__ import annotations

import argparse
import json
import pathlib
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

COLOURED = 9  # names with their own colour; the rest are grey


def with_depths(events: list[dict]) -> list[tuple[dict, int]]:
    """Each event with the number of events open around it."""
    events = sorted(events, key=lambda e: (e["ts"], -e["dur"]))
    stack: list[dict] = []
    out = []
    for e in events:
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        out.append((e, len(stack)))
        stack.append(e)
    return out


def self_times(placed: list[tuple[dict, int]]) -> dict[str, float]:
    """Self time per name: each event's duration less its direct children's."""
    child_time: dict[int, float] = defaultdict(float)
    stack: list[tuple[dict, int]] = []
    for e, depth in placed:
        while stack and stack[-1][1] >= depth:
            stack.pop()
        if stack:
            child_time[id(stack[-1][0])] += e["dur"]
        stack.append((e, depth))
    totals: dict[str, float] = defaultdict(float)
    for e, _ in placed:
        totals[e["name"]] += e["dur"] - child_time[id(e)]
    return totals


def render(trace_path: pathlib.Path, out: pathlib.Path, title: str) -> None:
    trace = json.loads(trace_path.read_text())
    complete = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    first_thread = min(e["tid"] for e in complete)
    placed = with_depths([e for e in complete if e["tid"] == first_thread])
    start = min(e["ts"] for e, _ in placed)
    totals = self_times(placed)
    whole = sum(totals.values())
    # Compiled calls and user ranges hold the ops: a quiet colour of their own.
    holders = {e["name"] for e, _ in placed if e.get("cat") in ("call", "user")}
    ops = [n for n in sorted(totals, key=totals.get, reverse=True) if n not in holders]
    top = ops[:COLOURED]
    palette = plt.get_cmap("tab10")
    colour = {name: palette(i) for i, name in enumerate(top)}
    colour.update({name: (0.85, 0.88, 0.93, 1.0) for name in holders})
    depth_count = 1 + max(d for _, d in placed)

    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.55 * depth_count + 0.25 * len(top) / 3), dpi=100)
    bars: dict[object, list[tuple[float, float]]] = defaultdict(list)
    for e, depth in placed:
        key = (colour.get(e["name"], (0.75, 0.75, 0.75, 1.0)), depth)
        bars[key].append(((e["ts"] - start) / 1e3, max(e["dur"] / 1e3, 1e-4)))
    for (rgba, depth), spans in bars.items():
        ax.broken_barh(spans, (depth_count - 1 - depth + 0.1, 0.8), facecolors=rgba,
                       edgecolors="none")
    span_ms = max((e["ts"] + e["dur"] - start) / 1e3 for e, _ in placed)
    for e, depth in placed:  # names on bars wide enough to hold them
        width = e["dur"] / 1e3
        if width > span_ms * 0.012 * len(e["name"]) / 4:
            ax.text((e["ts"] - start) / 1e3 + width / 2, depth_count - 1 - depth + 0.5, e["name"],
                    ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_xlim(0, span_ms)
    ax.set_ylim(0, depth_count)
    ax.set_yticks([depth_count - 0.5 - d for d in range(depth_count)])
    ax.set_yticklabels([f"depth {d}" for d in range(depth_count)])
    ax.set_xlabel("milliseconds")
    ax.set_title(title, fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[n]) for n in top]
    labels = [f"{n} {100 * totals[n] / whole:.1f}%" for n in top]
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=5,
              fontsize=8, frameon=False, title="self time", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"{out}: {out.stat().st_size // 1024} KB, {len(placed)} ranges")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=pathlib.Path, help="a Chrome trace JSON from kiln.profiler")
    parser.add_argument("png", type=pathlib.Path, help="where to write the timeline")
    parser.add_argument("--title", default="", help="the picture's title")
    args = parser.parse_args()
    render(args.trace, args.png, args.title or args.trace.name)


if __name__ == "__main__":
    main()
