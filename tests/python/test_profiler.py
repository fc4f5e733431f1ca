"""kiln.profiler against torch.profiler: the same table layout and call
counts for the same model, a Chrome trace that loads and nests, user
ranges, compiled steps inside their call, and nothing recorded when off.
`kiln bench --profile` prints the per-step table of a saved model."""
import json
import os
import pathlib
import re
import subprocess

import pytest
import torch

import kiln
from kiln import nn

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("KILN_BUILD_DIR", ROOT / "build" / "release"))


def small_net():
    kiln.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def table_rows(text):
    """{name: cells} of a printed table (cells split on runs of 2+ spaces)."""
    lines = text.splitlines()
    rows = {}
    for line in lines[3:]:
        if line.startswith("---"):
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = cells
    return rows


def header_cells(text):
    return re.split(r"\s{2,}", text.splitlines()[1].strip())


def well_nested(events):
    """Per thread, each complete event inside the one open around it."""
    by_thread = {}
    for e in events:
        by_thread.setdefault(e["tid"], []).append(e)
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in thread_events:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            if stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"] + 1e-9:
                return False
            stack.append(e)
    return True


def test_table_has_torchs_columns_and_the_models_call_counts():
    net = small_net()
    x = kiln.randn(2, 8)
    with kiln.profiler.profile(record_shapes=True, profile_memory=True) as prof:
        for _ in range(3):
            net(x)
    text = prof.key_averages(group_by_input_shape=True).table(
        sort_by="self_cpu_time_total", row_limit=10
    )

    torch_net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    with torch.profiler.profile(record_shapes=True, profile_memory=True) as torch_prof:
        for _ in range(3):
            torch_net(torch.randn(2, 8))
    torch_text = torch_prof.key_averages(group_by_input_shape=True).table(
        sort_by="self_cpu_time_total", row_limit=10
    )
    assert header_cells(text) == header_cells(torch_text)
    assert text.splitlines()[-1].startswith("Self CPU time total: ")

    counts = {e.key: e.count for e in prof.key_averages()}
    torch_counts = {e.key: e.count for e in torch_prof.key_averages()}
    for op in ("linear", "relu"):
        assert counts[op] == torch_counts["aten::" + op] == (6 if op == "linear" else 3)
    rows = table_rows(prof.key_averages().table(sort_by="count"))
    assert rows["linear"][-1] == "6" and rows["relu"][-1] == "3"
    shaped = {(e.key, e.input_shapes) for e in prof.key_averages(group_by_input_shape=True)}
    assert ("linear", "[[2, 8], [16, 8], [16]]") in shaped
    assert ("linear", "[[2, 16], [4, 16], [4]]") in shaped


def test_self_time_is_total_less_the_nested_ranges():
    x = kiln.randn(32, 32)
    with kiln.profiler.profile() as prof:
        with kiln.profiler.record_function("block"):
            for _ in range(4):
                x = (x @ x).tanh()
    events = prof.events()
    block = next(e for e in events if e.name == "block")
    children = [e for e in events if e.depth == 1]
    assert block.kind == "user" and block.depth == 0
    assert sorted({e.name for e in children}) == ["matmul", "tanh"]
    assert len(children) == 8
    assert block.self_cpu_time_total == pytest.approx(
        block.duration_us - sum(e.duration_us for e in children), abs=1e-3
    )
    row = next(r for r in prof.key_averages() if r.key == "block")
    assert row.self_cpu_time_total < row.cpu_time_total


def test_chrome_trace_loads_and_nests_per_thread(tmp_path):
    net = small_net()
    with kiln.profiler.profile(record_shapes=True) as prof:
        with kiln.profiler.record_function("inference"):
            net(kiln.randn(2, 8))
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    metadata = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    assert {e["name"] for e in metadata} >= {"process_name", "thread_name"}
    assert len(complete) == len(prof.events())
    for e in complete:
        assert isinstance(e["name"], str) and e["cat"] in ("op", "step", "call", "user")
        assert isinstance(e["ts"], float | int) and e["dur"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
    assert well_nested(complete)
    inference = next(e for e in complete if e["name"] == "inference")
    linear = next(e for e in complete if e["name"] == "linear")
    assert inference["ts"] <= linear["ts"]
    assert linear["ts"] + linear["dur"] <= inference["ts"] + inference["dur"]
    assert linear["args"]["Input Dims"] == [[2, 8], [16, 8], [16]]


def test_backward_nodes_hold_their_gradient_ops_as_in_torch():
    def run(lib, profiler_of):
        x = lib.ones(4, 3, requires_grad=True)
        w = lib.ones(3, requires_grad=True)
        with profiler_of() as prof:
            ((x * w).exp().sum()).backward()
        return prof

    prof = run(kiln, kiln.profiler.profile)
    torch_prof = run(torch, torch.profiler.profile)
    events = prof.events()
    backward = [e.name for e in events if e.name.endswith("Backward0")]
    assert backward == ["SumBackward0", "ExpBackward0", "MulBackward0"]
    for node in backward:
        torch_name = "autograd::engine::evaluate_function: " + node
        assert any(e.key == torch_name for e in torch_prof.key_averages()), torch_name
    # each node's gradient ops nest in it; the leaves' accumulations as in torch
    node = next(e for e in events if e.name == "MulBackward0")
    inside = [e for e in events if e.depth == node.depth + 1 and e.start_us >= node.start_us
              and e.start_us + e.duration_us <= node.start_us + node.duration_us + 1e-3]
    assert inside and all(e.kind == "op" for e in inside)
    torch_accumulate = sum(e.count for e in torch_prof.key_averages()
                           if e.key == "torch::autograd::AccumulateGrad")
    assert sum(e.name == "AccumulateGrad" for e in events) == torch_accumulate == 2


def test_record_function_as_decorator_and_only_while_profiling():
    @kiln.profiler.record_function("helper")
    def helper(t):
        return t * t

    helper(kiln.ones(3))  # no profile: nothing opens
    with kiln.profiler.profile() as prof:
        helper(kiln.ones(3))
    names = [(e.name, e.depth) for e in prof.events()]
    assert names == [("helper", 0), ("mul", 1)]


def test_off_records_nothing():
    x = kiln.randn(4)
    with kiln.profiler.profile(enabled=False) as off:
        x + x
    assert off.events() == [] and off.key_averages() == []
    with kiln.profiler.profile() as prof:
        pass
    x + x  # after the profile
    assert prof.events() == []
    assert not kiln._C.profiler.recording()


def test_compiled_function_steps_nest_in_their_call():
    net = small_net()
    x = kiln.randn(2, 8)
    traced = kiln.jit.trace(net, x)
    traced(x)
    with kiln.profiler.profile(record_shapes=True) as prof:
        traced(x)
        traced(x)
    events = prof.events()
    calls = [e for e in events if e.kind == "call"]
    steps = [e for e in events if e.kind == "step"]
    assert [e.name for e in calls] == ["CompiledFunction"] * 2
    assert steps and len(steps) % 2 == 0
    assert all(e.depth == 1 for e in steps)
    for call in calls:
        inside = [
            s
            for s in steps
            if call.start_us <= s.start_us
            and s.start_us + s.duration_us <= call.start_us + call.duration_us + 1e-3
        ]
        assert len(inside) == len(steps) // 2
    assert steps[0].input_shapes[0] == [2, 8]
    assert "linear_act" in {s.name for s in steps}  # the fused Linear + ReLU


def test_record_shapes_also_records_attributes_such_as_a_fused_program(tmp_path):
    x = kiln.randn(4, 8)
    fused = kiln.jit.trace(lambda t: (t.sigmoid() * t).neg(), x)
    with kiln.profiler.profile(record_shapes=True) as prof:
        x.sum(dim=1, keepdim=True)
        fused(x)
    by_name = {e.name: e for e in prof.events()}
    assert "dims=[1]" in by_name["sum"].attributes and "keepdim=true" in by_name["sum"].attributes
    program = by_name["fused_elementwise"].attributes
    assert program.startswith("program=") and "sigmoid" in program and "neg" in program
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    trace = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    step = next(e for e in trace if e["name"] == "fused_elementwise")
    assert step["args"]["Attributes"] == program
    with kiln.profiler.profile() as plain:
        fused(x)
    assert all(e.attributes == "" for e in plain.events())


def test_errors_and_edge_cases_are_pytorchs():
    with kiln.profiler.profile() as prof:
        kiln.ones(2) + 1
    # no shapes recorded: grouping by them changes nothing, and no column shows
    grouped = prof.key_averages(group_by_input_shape=True).table()
    assert "Input Shapes" not in grouped
    assert [r.key for r in prof.key_averages(group_by_input_shape=True)] == [
        r.key for r in prof.key_averages()
    ]
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="speed")
    with pytest.raises(RuntimeError, match="already recording"):
        with kiln.profiler.profile():
            with kiln.profiler.profile():
                pass


def test_kiln_bench_profile_prints_the_step_table(tmp_path):
    tool = BUILD / "kiln"
    assert tool.exists(), f"no kiln tool at {tool}"
    net = small_net()
    kiln.jit.trace(net, kiln.randn(3, 8)).save(tmp_path / "m.kiln")
    trace = tmp_path / "t.json"
    result = subprocess.run(
        [str(tool), "bench", str(tmp_path / "m.kiln"), "--iterations", "20", "--warmup", "2",
         "--profile", "--trace", str(trace)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    table = result.stdout[result.stdout.index("profile of 20 calls") :]
    rows = table_rows(table.split("\n", 1)[1])
    assert rows["CompiledFunction"][-1] == "20"
    assert rows["linear_act"][-1] == "20" and rows["linear"][-1] == "20"
    assert "Self CPU Mem" in table
    assert json.loads(trace.read_text())["traceEvents"]
    refused = subprocess.run(
        [str(tool), "bench", str(tmp_path / "m.kiln"), "--trace", str(trace)],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 1 and "--trace needs --profile" in refused.stderr


def test_a_python_number_an_op_converts_is_not_an_op_of_its_own():
    """`x + 1` on floats converts the int 1 to float32, as torch does inside
    its add: the profile shows the add alone (torch: aten::add alone), while
    a tensor of another dtype is still cast by an op of its own."""
    x = kiln.randn(3)
    ints = kiln.arange(3)
    with kiln.profiler.profile() as prof:
        plus_one = x + 1
        scaled = ints * 2.5
    assert [e.name for e in prof.events()] == ["add", "mul", "cast"]
    assert plus_one.dtype == kiln.float32 and scaled.dtype == kiln.float32
    reference = torch.from_numpy(x.numpy())
    assert torch.equal(torch.from_numpy(plus_one.numpy()), reference + 1)
    assert torch.equal(torch.from_numpy(scaled.numpy()), torch.arange(3) * 2.5)
