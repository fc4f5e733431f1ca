// Non-maximum suppression as ONNX's NonMaxSuppression defines it (and ONNX
// Runtime computes it): per batch and class, the boxes whose score passes
// the threshold, best score first (the lower box index first on ties), each
// kept unless it overlaps an already kept box by an IoU above the threshold,
// at most max_per_class of them.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::cpu {

struct NmsGeometry {
  int64_t batches = 0, classes = 0, boxes = 0;
};

// boxes: [batches, boxes, 4] contiguous, as (y1, x1, y2, x2) corners in any
// order, or (x_center, y_center, width, height) with center_point_box.
// scores: [batches, classes, boxes] contiguous. Returns the kept
// (batch, class, box) triples, flattened, batch-major then class then
// the order they were kept in.
std::vector<int64_t> non_max_suppression_f32(const float* boxes, const float* scores,
                                             const NmsGeometry& geometry, int64_t max_per_class,
                                             float iou_threshold,
                                             std::optional<float> score_threshold,
                                             bool center_point_box);

}  // namespace kiln::cpu
