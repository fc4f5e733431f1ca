"""Rows for the ops whose output size the data decides (Note [Data-dependent
output shapes] in src/kiln/ops/data_dependent.h): nonzero, unique and
non_max_suppression. Their outputs are integer positions, or values picked
from the input, and carry no gradient (grad=False): torch.nonzero's are
integers, and torch.unique does not differentiate its values either.

unique's second output, each value's first occurrence, is ONNX's (torch has
none): the oracle derives it from torch.unique's inverse with scatter_reduce.
PyTorch has no non-maximum suppression (torchvision's is not installed): its
oracle is the greedy loop of the ONNX specification, written in torch below
with ONNX Runtime's rules for ties and degenerate boxes."""
import torch

from oracle import Case, absent, bools, ints, randn, values


def nonzero(x, name=""):
    return Case("nonzero", [x], lambda t: torch.nonzero(t), name=name, grad=False)


def _first_occurrences(inverse, count):
    flat = inverse.reshape(-1)
    n = flat.numel()
    first = torch.full((count,), n, dtype=torch.int64)
    return first.scatter_reduce(0, flat, torch.arange(n), "amin")


def _unique(t, dim=None, sorted=True):
    values_, inverse, counts = torch.unique(t, sorted=True, return_inverse=True,
                                            return_counts=True, dim=dim)
    first = _first_occurrences(inverse, counts.numel())
    if sorted:
        return values_, first, inverse, counts
    order = torch.argsort(first)  # by first occurrence
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel())
    picked = values_[order] if dim is None else values_.index_select(dim, order)
    return picked, first[order], rank[inverse], counts[order]


def unique(x, dim=None, sorted=True, name=""):
    attrs = {"sorted": sorted}
    if dim is not None:
        attrs["dim"] = dim
    return Case("unique", [x], lambda t: _unique(t, dim, sorted), attrs=attrs, name=name,
                grad=False)


def _corners(box, center):
    if center:  # x_center, y_center, width, height
        return (box[0] - box[2] / 2, box[1] - box[3] / 2, box[0] + box[2] / 2,
                box[1] + box[3] / 2)
    return (torch.minimum(box[1], box[3]), torch.minimum(box[0], box[2]),
            torch.maximum(box[1], box[3]), torch.maximum(box[0], box[2]))


def _suppresses(a, b, threshold):
    x_min, x_max = torch.maximum(a[0], b[0]), torch.minimum(a[2], b[2])
    y_min, y_max = torch.maximum(a[1], b[1]), torch.minimum(a[3], b[3])
    if x_max <= x_min or y_max <= y_min:
        return False
    inter = (x_max - x_min) * (y_max - y_min)
    area_a, area_b = (a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1])
    union = area_a + area_b - inter
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return bool(inter / union > threshold)


def _nms(boxes, scores, max_out, iou, score_threshold, center):
    limit = int(max_out.item()) if max_out is not None else 0
    iou_threshold = float(iou.item()) if iou is not None else 0.0
    rows = []
    for b in range(boxes.shape[0]):
        corners = [_corners(boxes[b, i], center) for i in range(boxes.shape[1])]
        for c in range(scores.shape[1]):
            s = scores[b, c]
            candidates = [i for i in range(s.numel())
                          if score_threshold is None or s[i] > score_threshold]
            candidates.sort(key=lambda i: -float(s[i]))  # stable: lower index first on ties
            kept = []
            for i in candidates:
                if len(kept) >= limit:
                    break
                if any(_suppresses(corners[k], corners[i], iou_threshold) for k in kept):
                    continue
                kept.append(i)
                rows.append([b, c, i])
    return torch.tensor(rows, dtype=torch.int64).reshape(-1, 3)


def nms(boxes, scores, max_out, iou, score, center=False, name=""):
    def fn(b, s, m, i, st):
        return _nms(b, s, m, i, st, center)
    return Case("non_max_suppression", [boxes, scores, max_out, iou, score], fn,
                attrs={"center_point_box": center}, name=name, grad=False)


# Two clusters of overlapping boxes and one apart, as (y1, x1, y2, x2).
BOXES = [[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9],
          [0.0, 10.0, 1.0, 11.0], [0.0, 10.1, 1.0, 11.1], [0.0, 100.0, 1.0, 101.0]]]
SCORES = [[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]]
CENTER_BOXES = [[[0.5, 0.5, 1.0, 1.0], [0.6, 0.5, 1.0, 1.0], [0.4, 0.5, 1.0, 1.0],
                 [10.5, 0.5, 1.0, 1.0], [10.6, 0.5, 1.0, 1.0], [100.5, 0.5, 1.0, 1.0]]]

CASES = [
    nonzero(values([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]]), "f32_2d"),
    nonzero(ints(-1, 2, 7), "int_1d"),
    nonzero(bools(2, 3, 4), "bool_3d"),
    nonzero(values([[0, 0], [0, 0]], dtype="int32"), "all_zero"),
    nonzero(randn(0, 3), "empty"),
    nonzero(values(2.5, shape=()), "zero_dim"),
    unique(values([2.0, -1.0, 2.0, 0.5, -1.0, 7.0]), name="f32"),
    unique(ints(0, 4, 3, 5), name="int_2d_flattened"),
    unique(values([[1, 2], [3, 4], [1, 2], [0, 9]], dtype="int64"), dim=0, name="rows"),
    unique(values([[1, 3, 1], [2, 4, 2]], dtype="int32"), dim=-1, name="columns"),
    unique(bools(9), name="bool"),
    unique(values([5, 1, 5, 3, 1], dtype="int64"), sorted=False, name="first_occurrence"),
    unique(values([[2, 0], [1, 1], [2, 0]], dtype="int64"), dim=0, sorted=False,
           name="rows_first_occurrence"),
    nms(values(BOXES), values(SCORES), values([3], dtype="int64", shape=(1,)),
        values(0.5, shape=()), absent(), name="corners"),
    nms(values(CENTER_BOXES), values(SCORES), values(2, dtype="int64", shape=()),
        values(0.5, shape=()), values(0.4, shape=()), center=True, name="center_score_threshold"),
    nms(values(BOXES * 2), values(SCORES * 2), values([10], dtype="int64", shape=(1,)),
        values(0.0, shape=()), absent(), name="two_batches_iou_zero"),
    nms(values(BOXES), values([[SCORES[0][0], SCORES[0][0][::-1]]]), absent(), absent(), absent(),
        name="no_max_gives_none"),
]
