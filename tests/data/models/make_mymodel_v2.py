"""Writes mymodel_v2.kiln: a graph with symbolic sizes (format version 2,
issue 21), an attention-style block over [batch, seq, 16] whose view and
narrow take symbolic sizes, with an example at batch 2, seq 4 kept in the
file. The file in git was written by model format version 2 (op schema 1);
like mymodel_v1.kiln it is a test input that later kiln versions must still
load, so do not regenerate it."""
import sys

import kiln

GRAPH = """graph(%x : f32[batch, seq, 16]) {
  %w : f32[16, 16] = param
  %b : f32[16] = param
  %0 = linear(%x, %w, %b)
  %1 = view(%0) {shape=[batch, seq, 2, 8]}
  %2 = transpose(%1) {dim0=1, dim1=2}
  %3 = transpose(%2) {dim0=2, dim1=3}
  %4 = matmul(%2, %3)
  %5 = softmax(%4) {dim=-1}
  %6 = matmul(%5, %2)
  %7 = transpose(%6) {dim0=1, dim1=2}
  %8 = reshape(%7) {shape=[batch, seq, -1]}
  %9 = narrow(%8) {dim=1, start=0, length=seq // 2}
  return (%8, %9)
}
"""

kiln.manual_seed(2026)
graph = kiln.jit.parse_graph(GRAPH)
for name, data in (("w", kiln.randn(16, 16) * 0.3), ("b", kiln.randn(16))):
    param = graph.find_param(name)
    param.replace_all_uses_with(graph.constant(data))
    graph.remove_unused(param)
module = kiln.jit.from_graph(graph)
module.save(sys.argv[1] if len(sys.argv) > 1 else "mymodel_v2.kiln", kiln.randn(2, 4, 16))
