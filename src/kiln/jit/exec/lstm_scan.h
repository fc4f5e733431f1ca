// A scan whose step is one LSTM step, run at batch 1 as one fused kernel
// per step (cpu::lstm_recurrent_scan_f32) instead of its step's plan.
//
// nn's LSTM layers (nn/rnn.cpp) make each layer and direction one scan
// whose step block is
//
//   step(%h, %c, %gi, %w_hh, [%b_hh]) {
//     %gh = linear(%h, %w_hh, [%b_hh])
//     %h', %c' = lstm_cell_pointwise(%gi, %gh, %c)
//     return (%h', %c', %h')
//   }
//
// At batch 1 the step plan streams W_hh through a matrix-vector product and
// runs the cell in a second kernel; the fused kernel packs W_hh once (kept
// across runs under the key the enclosing plan gives the weight, as
// products keep packed weights) and runs the cell on each block of gates as
// it leaves the registers. The graph stays as it is: passes, autodiff and
// export see the scan; only its execution changes, and only where the
// shapes fit (float32, one row, contiguous rows), else the plan runs.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>

#include "kiln/jit/ir/graph.h"
#include "kiln/kernels/cpu/rnn.h"
#include "kiln/ops/op.h"

namespace kiln::jit {

class LstmScan {
 public:
  // Null unless `scan`'s step block is the LSTM step above.
  static std::unique_ptr<LstmScan> match(const Node& scan);

  // Runs the scan (inputs h0, c0, gi, captures; outputs h_n, c_n, ys) and
  // returns true, or returns false having done nothing when the views do
  // not fit. keys: one per node input (ScanKernel's).
  bool run(const KernelArgs& args, std::span<const uint64_t> keys) const;

 private:
  LstmScan(size_t weight, size_t bias, bool reverse)
      : weight_(weight), bias_(bias), reverse_(reverse) {}

  struct Packed {
    uint64_t key = 0;
    const void* source = nullptr;
    cpu::LstmRecurrentWeights weights;
  };
  std::shared_ptr<const Packed> packed_for(const cpu::StridedView& w, uint64_t key) const;

  size_t weight_, bias_;  // node inputs; bias_ == 0: none
  bool reverse_;
  mutable std::mutex packed_mutex_;
  mutable std::shared_ptr<Packed> packed_;
};

}  // namespace kiln::jit
