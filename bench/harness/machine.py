"""This machine's FP32 FMA peak and read bandwidth per cache level, and the
roofline bound they give each case (driver side).

The numbers come from bench/fma_peak.cpp (one core; for N threads, N copies
run at once and their rates add up) and bench/bandwidth.cpp (N threads
reading at once), built by CMake as build/release/bench/kiln_bench_peak and
kiln_bench_bandwidth, or else compiled here with g++ into .bench/bin.
"""
import os
import pathlib
import platform
import subprocess

from harness.workloads import cost_of

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
BUILD_BENCH = ROOT / "build/release/bench"
FALLBACK_BIN = ROOT / ".bench/bin"
COMPILE_FLAGS = ["-O2", "-mavx2", "-mfma", "-std=c++20"]
LEVELS = ("l1", "l2", "l3", "dram")


def find_or_build(target, source, extra_flags=(), link=()):
    """(path of the binary, where it came from) or (None, why not): the CMake
    build's, else `source` compiled with g++ into .bench/bin (again when the
    source or a linked library is newer than the binary)."""
    built = BUILD_BENCH / target
    if built.exists():
        return built, str(built.relative_to(ROOT))
    binary = FALLBACK_BIN / target
    inputs = [ROOT / source] + [pathlib.Path(p) for p in link if os.sep in str(p)]
    newest = max(p.stat().st_mtime for p in inputs if p.exists())
    origin = f"{source} compiled with g++ ({built.relative_to(ROOT)} not built)"
    if binary.exists() and binary.stat().st_mtime >= newest:
        return binary, origin
    FALLBACK_BIN.mkdir(parents=True, exist_ok=True)
    cmd = ["g++", *COMPILE_FLAGS, *extra_flags, str(ROOT / source), "-o", str(binary),
           "-pthread", *[str(p) for p in link]]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    except subprocess.CalledProcessError as e:
        first_error = next((line for line in e.stderr.splitlines() if "error" in line),
                           e.stderr.strip()[-200:])
        return None, f"{built.name} not built and g++ failed: {first_error[:200]}"
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"{built.name} not built and g++ failed ({type(e).__name__})"
    return binary, origin


def _key_values(text):
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                values[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return values


def measure_peak(threads):
    """(GFLOP/s of `threads` cores, or None; where it came from)."""
    binary, origin = find_or_build("kiln_bench_peak", "bench/fma_peak.cpp")
    if binary is None:
        return None, origin
    try:
        copies = [subprocess.Popen([str(binary)], stdout=subprocess.PIPE, text=True)
                  for _ in range(threads)]
        outs = [p.communicate(timeout=120)[0] for p in copies]
        total = sum(_key_values(out)["fp32_peak_gflops"] for out in outs)
    except (OSError, subprocess.SubprocessError, KeyError) as e:
        return None, f"{origin}: failed ({type(e).__name__})"
    note = f" x {threads} copies at once" if threads > 1 else ""
    return total, origin + note


def measure_bandwidth(threads):
    """({level: GB/s}, {level: cache bytes}, where it came from); empty
    dicts when it could not be measured."""
    binary, origin = find_or_build("kiln_bench_bandwidth", "bench/bandwidth.cpp")
    if binary is None:
        return {}, {}, origin
    try:
        out = subprocess.run([str(binary), "--threads", str(threads)], check=True,
                             capture_output=True, text=True, timeout=300).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return {}, {}, f"{origin}: failed ({type(e).__name__})"
    values = _key_values(out)
    bandwidth = {lv: values[f"{lv}_read_gbs"] for lv in LEVELS if f"{lv}_read_gbs" in values}
    sizes = {lv: int(values[f"{lv}_bytes"]) for lv in LEVELS if f"{lv}_bytes" in values}
    return bandwidth, sizes, origin


def describe():
    """The machine in words, for the table's heading and the JSON."""
    model = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "logical_cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}


def measure(threads):
    """Everything the roofline needs for `threads` threads."""
    peak, peak_origin = measure_peak(threads)
    bandwidth, sizes, bw_origin = measure_bandwidth(threads)
    return {"threads": threads, "fp32_peak_gflops": peak, "peak_source": peak_origin,
            "read_gbs": bandwidth, "cache_bytes": sizes, "bandwidth_source": bw_origin}


def level_shares(working_set, cache_bytes, threads=1):
    """[(level, bytes of the working set it holds)], fastest level first,
    ending at the smallest level the whole set fits in. L1 and L2 are per
    core: with N threads the set may spread over N of them."""
    shares, held = [], 0
    for level in LEVELS:
        size = cache_bytes.get(level, 0) if level != "dram" else working_set
        capacity = size * threads if level in ("l1", "l2") else size
        if capacity <= held:
            continue  # unknown, or no larger than the level before
        shares.append((level, min(working_set, capacity) - held))
        held = min(working_set, capacity)
        if held >= working_set:
            break
    return shares


def roofline(case, machine):
    """{bound_us, compute_us, memory_us, level, ...} of one call, or None
    where the machine could not be measured. bound = max(flops / peak, the
    time to read the bytes moved). The bytes are read at the bandwidth of the
    level the working set fits in, except the share of the set that the
    faster levels hold, read at theirs: a set just past L2 is mostly read
    from L2, and charging all of it to L3 would be no lower bound."""
    peak, bandwidth = machine.get("fp32_peak_gflops"), machine.get("read_gbs", {})
    if not peak or not bandwidth:
        return None
    cost = cost_of(case)
    shares = level_shares(cost.working_set, machine.get("cache_bytes", {}), machine["threads"])
    if any(level not in bandwidth for level, _ in shares):
        return None
    compute_us = cost.flops / (peak * 1e3)
    memory_us = sum(cost.bytes_moved * share / cost.working_set / (bandwidth[level] * 1e3)
                    for level, share in shares)
    level = shares[-1][0]
    return {"bound_us": max(compute_us, memory_us), "compute_us": compute_us,
            "memory_us": memory_us, "level": level, "level_shares": dict(shares),
            "flops": cost.flops, "bytes": cost.bytes_moved,
            "working_set_bytes": cost.working_set,
            "bound_by": "compute" if compute_us >= memory_us else f"{level.upper()} bandwidth"}


def framework_versions():
    """"kiln 0.1.0, PyTorch 2.13.0, ONNX Runtime 1.30.0" for a table's
    title; one that is absent is "not installed"."""
    out = []
    for module, label in (("kiln", "kiln"), ("torch", "PyTorch"),
                          ("onnxruntime", "ONNX Runtime")):
        try:
            out.append(f"{label} {__import__(module).__version__.split('+')[0]}")
        except ImportError:
            out.append(f"{label} not installed")
    return ", ".join(out)
