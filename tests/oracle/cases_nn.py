"""Rows for dropout, batch_norm and layer_norm. Random ops are checked where
the result is fixed (p=0, eval); their statistics are checked in nn_test.cpp."""
import dataclasses

import torch
import torch.nn.functional as F

from oracle import Case, absent, ints, randn, uniform


def buffer(spec):
    """A running statistic: a buffer, not a parameter, so it gets no gradient
    (and PyTorch refuses to update a leaf that requires grad in place)."""
    return dataclasses.replace(spec, requires_grad=False)


CASES = [
    Case("dropout", [randn(3, 4)], lambda x: x.clone(), attrs={"p": 0.0}, name="p0",
         compare_outputs=[0]),
    Case("dropout", [randn(3, 4, layout="transposed")], lambda x: x.clone(),
         attrs={"p": 0.5, "train": False}, name="eval", compare_outputs=[0]),
    Case("dropout", [randn(5)], lambda x: torch.zeros_like(x), attrs={"p": 1.0}, name="p1",
         compare_outputs=[0]),
    Case("dropout", [randn(2)], attrs={"p": 1.5}, name="bad_p",
         error="dropout: probability has to be between 0 and 1, but got 1.5"),
    Case("dropout", [ints(0, 3, 2)], attrs={"p": 0.5}, name="int_input",
         error="dropout: expected a floating input, got int64"),

    Case("batch_norm",
         [randn(4, 3, 5, 5), randn(3), randn(3), buffer(randn(3)), buffer(uniform(0.5, 2, 3))],
         lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=True),
         attrs={"training": True}, name="train_2d", compare_outputs=[0], reduce_len=100),
    Case("batch_norm",
         [randn(4, 3, 5, 5, layout="transposed"), randn(3), randn(3), buffer(randn(3)),
          buffer(uniform(0.5, 2, 3))],
         lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=False),
         attrs={"training": False}, name="eval_2d_transposed", compare_outputs=[0]),
    Case("batch_norm", [randn(8, 6), absent(), absent(), buffer(randn(6)),
                        buffer(uniform(0.5, 2, 6))],
         lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, None, None, training=True, momentum=0.3,
                                              eps=1e-3),
         attrs={"training": True, "momentum": 0.3, "eps": 1e-3}, name="train_1d_no_affine",
         compare_outputs=[0], reduce_len=8),
    Case("batch_norm", [randn(8, 6, dtype="float64"), randn(6, dtype="float64"),
                        randn(6, dtype="float64"), absent(), absent()],
         lambda x, w, b, rm, rv: F.batch_norm(x, None, None, w, b, training=True),
         attrs={"training": True}, name="train_f64_no_running", compare_outputs=[0],
         reduce_len=8),
    Case("batch_norm", [randn(3, 2, 4, dtype="float64"), randn(2, dtype="float64"),
                        randn(2, dtype="float64"), buffer(randn(2, dtype="float64")),
                        buffer(uniform(0.5, 2, 2, dtype="float64"))],
         lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, training=False, eps=1e-3),
         attrs={"training": False, "eps": 1e-3}, name="eval_f64", compare_outputs=[0]),
    Case("batch_norm", [randn(5, 3, 2, dtype="float64"), randn(3, dtype="float64"), absent(),
                        buffer(randn(3, dtype="float64")),
                        buffer(uniform(0.5, 2, 3, dtype="float64"))],
         lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, None, training=True),
         attrs={"training": True}, name="train_f64_weight_only", compare_outputs=[0],
         reduce_len=10),
    Case("batch_norm", [randn(4, 3, 2), randn(4), absent(), absent(), absent()],
         attrs={"training": True}, name="bad_weight",
         error="batch_norm: expected weight of shape [3] for input of shape [4, 3, 2], got [4]"),
    Case("batch_norm", [randn(4, 3), absent(), absent(), absent(), absent()],
         attrs={"training": False}, name="eval_needs_stats",
         error="running_mean and running_var must be given"),
    Case("batch_norm", [randn(1, 3), absent(), absent(), absent(), absent()],
         attrs={"training": True}, name="one_value_per_channel",
         error="expected more than 1 value per channel"),
    Case("batch_norm", [randn(3), absent(), absent(), absent(), absent()],
         attrs={"training": True}, name="too_few_dims", error="at least 2 dims"),

    Case("layer_norm", [randn(4, 10), randn(10), randn(10)],
         lambda x, w, b: F.layer_norm(x, [10], w, b), attrs={"normalized_shape": [10]},
         compare_outputs=[0], reduce_len=10),
    Case("layer_norm", [randn(2, 3, 4, 5, layout="strided"), absent(), absent()],
         lambda x, w, b: F.layer_norm(x, [4, 5], eps=1e-3),
         attrs={"normalized_shape": [4, 5], "eps": 1e-3}, name="two_dims_strided",
         compare_outputs=[0], reduce_len=20),
    Case("layer_norm", [uniform(100, 101, 3, 64, dtype="float64"), randn(64, dtype="float64"),
                        absent()],
         lambda x, w, b: F.layer_norm(x, [64], w), attrs={"normalized_shape": [64]},
         name="f64_large_mean", compare_outputs=[0], reduce_len=64),
    Case("layer_norm", [randn(2, 3, 4, dtype="float64"), absent(), randn(4, dtype="float64")],
         lambda x, w, b: F.layer_norm(x, [4], None, b), attrs={"normalized_shape": [4]},
         name="f64_bias_only", compare_outputs=[0], reduce_len=4),
    Case("layer_norm", [randn(6, dtype="float64"), randn(6, dtype="float64"),
                        randn(6, dtype="float64")],
         lambda x, w, b: F.layer_norm(x, [6], w, b), attrs={"normalized_shape": [6]},
         name="f64_no_lead_dims", compare_outputs=[0], reduce_len=6),
    Case("layer_norm", [randn(0, 8), absent(), absent()], lambda x, w, b: F.layer_norm(x, [8]),
         attrs={"normalized_shape": [8]}, name="empty", compare_outputs=[0]),
    Case("layer_norm", [randn(4, 10), absent(), absent()], attrs={"normalized_shape": [5]},
         name="bad_shape",
         error="layer_norm: normalized_shape [5] does not match the trailing dims of input shape"
               " [4, 10]"),
]
