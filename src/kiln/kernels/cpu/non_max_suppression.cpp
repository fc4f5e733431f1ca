#include "kiln/kernels/cpu/non_max_suppression.h"

#include <algorithm>
#include <cmath>

namespace kiln::cpu {
namespace {

struct Corners {
  float x_min, y_min, x_max, y_max;
  float area() const { return (x_max - x_min) * (y_max - y_min); }
};

Corners corners_of(const float* box, bool center_point_box) {
  if (center_point_box) {  // x_center, y_center, width, height
    const float half_w = box[2] / 2, half_h = box[3] / 2;
    return {box[0] - half_w, box[1] - half_h, box[0] + half_w, box[1] + half_h};
  }
  // y1, x1, y2, x2: either corner may come first.
  return {std::min(box[1], box[3]), std::min(box[0], box[2]), std::max(box[1], box[3]),
          std::max(box[0], box[2])};
}

// ONNX Runtime's test, in its order: no overlap, or a degenerate box, never
// suppresses; otherwise intersection over union above the threshold does.
bool suppresses(const Corners& a, const Corners& b, float iou_threshold) {
  const float x_min = std::max(a.x_min, b.x_min), x_max = std::min(a.x_max, b.x_max);
  if (x_max <= x_min) return false;
  const float y_min = std::max(a.y_min, b.y_min), y_max = std::min(a.y_max, b.y_max);
  if (y_max <= y_min) return false;
  const float intersection = (x_max - x_min) * (y_max - y_min);
  if (intersection <= 0) return false;
  const float area_a = a.area(), area_b = b.area();
  const float union_area = area_a + area_b - intersection;
  if (area_a <= 0 || area_b <= 0 || union_area <= 0) return false;
  return intersection / union_area > iou_threshold;
}

}  // namespace

std::vector<int64_t> non_max_suppression_f32(const float* boxes, const float* scores,
                                             const NmsGeometry& geometry, int64_t max_per_class,
                                             float iou_threshold,
                                             std::optional<float> score_threshold,
                                             bool center_point_box) {
  std::vector<int64_t> selected;
  if (max_per_class <= 0) return selected;
  const int64_t n = geometry.boxes;
  std::vector<Corners> corners(static_cast<size_t>(n));
  std::vector<int64_t> candidates, kept;
  for (int64_t b = 0; b < geometry.batches; ++b) {
    for (int64_t i = 0; i < n; ++i)
      corners[size_t(i)] = corners_of(boxes + (b * n + i) * 4, center_point_box);
    for (int64_t c = 0; c < geometry.classes; ++c) {
      const float* s = scores + (b * geometry.classes + c) * n;
      candidates.clear();
      for (int64_t i = 0; i < n; ++i) {
        if (!score_threshold || s[i] > *score_threshold) candidates.push_back(i);
      }
      // NaN ranks last, so the order stays a strict weak one.
      auto rank = [s](int64_t i) { return std::isnan(s[i]) ? -INFINITY : s[i]; };
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](int64_t x, int64_t y) { return rank(x) > rank(y); });
      kept.clear();
      for (int64_t i : candidates) {
        if (int64_t(kept.size()) == max_per_class) break;
        bool overlaps = std::any_of(kept.begin(), kept.end(), [&](int64_t k) {
          return suppresses(corners[size_t(k)], corners[size_t(i)], iou_threshold);
        });
        if (overlaps) continue;
        kept.push_back(i);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  return selected;
}

}  // namespace kiln::cpu
