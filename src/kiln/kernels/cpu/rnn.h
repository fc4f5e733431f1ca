// The pointwise part of a recurrent cell step, over contiguous row-major
// buffers (the op glue makes inputs contiguous first). The matrix products
// of the step (x W_ihᵀ + b_ih, h W_hhᵀ + b_hh) come in as `gi` and `gh`, so
// the adds, the gate activations and the state update are one pass over
// the gates, as PyTorch's fused CUDA cells and cuDNN do.
#pragma once

#include <cstdint>
#include <memory>

namespace kiln::cpu {

// LSTM, gates in PyTorch's order (i, f, g, o) along each row of 4H:
//   i, f, o = sigmoid(gi + gh);  g = tanh(gi + gh)
//   c_out = f c + i g;  h_out = o tanh(c_out)
// gi, gh: [rows, 4H]; c, h_out, c_out: [rows, H].
template <typename T>
void lstm_cell_pointwise(const T* gi, const T* gh, const T* c, T* h_out, T* c_out, int64_t rows,
                         int64_t hidden);

// GRU, gates in PyTorch's order (r, z, n) along each row of 3H:
//   r, z = sigmoid(gi + gh);  n = tanh(gi_n + r gh_n)
//   h_out = (1 - z) n + z h
// gi, gh: [rows, 3H]; h, h_out: [rows, H].
template <typename T>
void gru_cell_pointwise(const T* gi, const T* gh, const T* h, T* h_out, int64_t rows,
                        int64_t hidden);

// The backward of each, recomputing the gates from gi and gh (the forward
// keeps nothing else). LSTM: from c_out and the gradients dh_out, dc_out
// [rows, H], the gradient of the gates' pre-activations (= of gi and of gh)
// dgates [rows, 4H] and of the cell state dc [rows, H].
template <typename T>
void lstm_cell_pointwise_backward(const T* gi, const T* gh, const T* c, const T* c_out,
                                  const T* dh_out, const T* dc_out, T* dgates, T* dc, int64_t rows,
                                  int64_t hidden);

// GRU: from dh_out [rows, H], dgi and dgh [rows, 3H] (they differ in the n
// gate, where gh_n is scaled by r) and dh [rows, H].
template <typename T>
void gru_cell_pointwise_backward(const T* gi, const T* gh, const T* h, const T* dh_out, T* dgi,
                                 T* dgh, T* dh, int64_t rows, int64_t hidden);

// ---- a whole float32 LSTM layer at batch 1 (lstm_recurrent.cpp) ----
//
// A batch-1 step is one matrix-vector product h W_hhᵀ, which streams all of
// W_hh [4H, K] (1 MiB at H = 256) from L2 or L3 for 4H K multiply-adds,
// then the cell on 4H gates. lstm_recurrent_scan_f32 runs every step of a
// layer as one kernel per step: W_hh packed once so that each block of 16
// hidden units has the rows of its four gates side by side ([K][4][16]),
// each block's gates summed in registers and the cell applied to them right
// there, so the gates never go through memory and the cell's arithmetic
// overlaps the stream of the next block. Each gate column sums over k in
// order from 0 and then adds the bias, as cpu::gemm_f32 sums a column: a
// batch-1 layer gets the bits a batched one gets for the same row.

// W_hh [4H, K] (rows `row_stride` floats apart, contiguous along K) packed
// for lstm_recurrent_scan_f32.
class LstmRecurrentWeights {
 public:
  static constexpr int64_t kUnits = 16;  // hidden units per block

  void pack(const float* w_hh, int64_t row_stride, int64_t hidden, int64_t k);
  int64_t hidden() const { return hidden_; }
  int64_t k() const { return k_; }
  int64_t blocks() const { return (hidden_ + kUnits - 1) / kUnits; }
  // Block b: [k][4 gates][kUnits], zero past the last unit.
  const float* block(int64_t b) const { return data_.get() + b * k_ * 4 * kUnits; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float[], Free> data_;
  int64_t capacity_ = 0, hidden_ = 0, k_ = 0;
};

// One layer's steps. Step s reads gi_t = gi + t gi_step ([4H], x_t W_ihᵀ +
// b_ih) with t = s, or steps - 1 - s when reverse, and the state after the
// step before (h0, c0 first), and writes h_t to ys + t ys_step; h_n and c_n
// get the state after the last step. b_hh: [4H] or null. ys must not
// overlap the other arguments; c0 may be c_n.
struct LstmScanArgs {
  const float* gi = nullptr;
  int64_t gi_step = 0;
  float* ys = nullptr;
  int64_t ys_step = 0;
  const float *h0 = nullptr, *c0 = nullptr, *b_hh = nullptr;
  float *h_n = nullptr, *c_n = nullptr;
  int64_t steps = 0;
  bool reverse = false;
};
void lstm_recurrent_scan_f32(const LstmRecurrentWeights& w, const LstmScanArgs& args);

}  // namespace kiln::cpu
