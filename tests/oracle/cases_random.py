"""Rows for the random ops (uniform, normal, randint and the _like forms,
bernoulli, multinomial, randperm).
PyTorch cannot draw kiln's numbers, so, as for dropout, the rows compare
where the result is fixed (low == high, std == 0, a range of one integer) and
check shapes, dtypes and errors; random_ops_test.cpp checks the statistics
of real draws and that eager and compiled code draw the same numbers."""
import torch

from oracle import Case, ints, randn, values

CASES = [
    Case("uniform", [], lambda: torch.full((2, 3), 2.5),
         attrs={"shape": [2, 3], "low": 2.5, "high": 2.5}, name="fixed"),
    Case("uniform", [], lambda: torch.full((4,), -1.0, dtype=torch.float64),
         attrs={"shape": [4], "low": -1.0, "high": -1.0, "dtype": "float64"}, name="fixed_f64"),
    Case("uniform", [], lambda: torch.empty(0, 3), attrs={"shape": [0, 3]}, name="empty"),
    Case("uniform", [], lambda: torch.full((), 1.0), attrs={"shape": [], "low": 1.0, "high": 1.0},
         name="scalar"),
    Case("uniform", [], attrs={"shape": [2], "dtype": "int64"}, name="int_dtype",
         error="uniform: expected a floating dtype, got int64"),
    Case("uniform", [], attrs={"shape": [2], "low": 1.0, "high": 0.0}, name="bad_range",
         error="uniform: expected low <= high, got low=1 high=0"),
    Case("uniform", [], attrs={"shape": [2, -1]}, name="negative_size",
         error="uniform: negative size in shape [2, -1]"),

    Case("normal", [], lambda: torch.full((3, 2), 0.5),
         attrs={"shape": [3, 2], "mean": 0.5, "std": 0.0}, name="fixed"),
    Case("normal", [], lambda: torch.full((5,), -2.0, dtype=torch.float64),
         attrs={"shape": [5], "mean": -2.0, "std": 0.0, "dtype": "float64"}, name="fixed_f64"),
    Case("normal", [], attrs={"shape": [2], "std": -1.0}, name="negative_std",
         error="normal: expected std >= 0, got -1"),
    Case("normal", [], attrs={"shape": [2], "dtype": "bool"}, name="bool_dtype",
         error="normal: expected a floating dtype, got bool"),

    Case("uniform_like", [randn(3, 4, layout="transposed")], lambda x: torch.full_like(x, 0.25),
         attrs={"low": 0.25, "high": 0.25}, name="fixed"),
    Case("uniform_like", [randn(2, 3)],
         lambda x: torch.full_like(x, 3.0, dtype=torch.float64),
         attrs={"low": 3.0, "high": 3.0, "dtype": "float64"}, name="to_f64"),
    Case("uniform_like", [ints(0, 5, 4)], lambda x: torch.full_like(x, 1.0, dtype=torch.float32),
         attrs={"low": 1.0, "high": 1.0, "dtype": "float32"}, name="from_ints"),
    Case("uniform_like", [ints(0, 5, 4)], name="int_input",
         error="uniform_like: expected a floating dtype, got int64"),

    Case("normal_like", [randn(2, 3, 4, layout="strided")], lambda x: torch.full_like(x, -0.5),
         attrs={"mean": -0.5, "std": 0.0}, name="fixed"),
    Case("normal_like", [randn(0, 2, dtype="float64")], lambda x: torch.empty_like(x),
         name="empty"),
    Case("normal_like", [randn(3)], attrs={"std": -0.1}, name="negative_std",
         error="normal_like: expected std >= 0, got -0.1"),

    Case("randint", [], lambda: torch.full((2, 3), 7, dtype=torch.int64),
         attrs={"low": 7, "high": 8, "shape": [2, 3]}, name="fixed"),
    Case("randint", [], lambda: torch.full((4,), 3.0),
         attrs={"low": 3, "high": 4, "shape": [4], "dtype": "float32"}, name="fixed_f32"),
    Case("randint", [], lambda: torch.zeros(0, dtype=torch.int32),
         attrs={"high": 10, "shape": [0], "dtype": "int32"}, name="empty_i32"),
    Case("randint", [], attrs={"low": 5, "high": 5, "shape": [2]}, name="bad_range",
         error="randint: expected low < high, got low=5 high=5"),

    # Where the draw is fixed: probabilities of 0 and 1, one category with
    # weight, a permutation of one element.
    # p.clone() stands in for the draw, so its gradient means nothing here.
    Case("bernoulli", [values([[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]])], lambda p: p.clone(),
         name="fixed", grad=False),
    Case("bernoulli", [values([1.0, 0.0, 1.0, 1.0], "float64", layout="strided")],
         lambda p: p.clone(), name="fixed_f64_strided", grad=False),
    Case("bernoulli", [values([0.5, 1.5])], name="out_of_range",
         error="bernoulli: expected all probabilities in [0, 1], got 1.5 at flat index 1"),
    Case("bernoulli", [ints(0, 2, 3)], name="int_input",
         error="bernoulli: expected floating probabilities, got int64"),

    Case("multinomial", [values([0.0, 0.0, 3.0, 0.0])],
         lambda w: torch.multinomial(w, 4, replacement=True),
         attrs={"num_samples": 4, "replacement": True}, name="one_category"),
    Case("multinomial", [values([[0.0, 2.0], [5.0, 0.0]], "float64")],
         lambda w: torch.multinomial(w, 1), attrs={"num_samples": 1}, name="rows_f64"),
    Case("multinomial", [values([0.0, 1.0, 0.0])], attrs={"num_samples": 2}, name="too_few",
         error="multinomial: cannot sample num_samples=2 > the number of categories with a "
               "non-zero probability (1) without replacement (row 0)"),
    Case("multinomial", [values([1.0, 2.0])], attrs={"num_samples": 3}, name="more_than_size",
         error="multinomial: cannot sample n_sample=3 > prob_dist.size(-1)=2 samples without "
               "replacement"),
    Case("multinomial", [values([1.0, -1.0])], attrs={"num_samples": 1}, name="negative",
         error="multinomial: probability tensor contains either inf, nan or an element < 0"),
    Case("multinomial", [values([0.0, 0.0])], attrs={"num_samples": 1, "replacement": True},
         name="zero_sum", error="multinomial: invalid probability distribution (sum of "
                                "probabilities <= 0) in row 0"),
    Case("multinomial", [randn(2, 2, 2)], attrs={"num_samples": 1}, name="rank3",
         error="multinomial: prob_dist must be 1 or 2 dim, got shape [2, 2, 2]"),

    Case("randperm", [], lambda: torch.zeros(1, dtype=torch.int64), attrs={"n": 1},
         name="one"),
    Case("randperm", [], lambda: torch.zeros(0, dtype=torch.int32),
         attrs={"n": 0, "dtype": "int32"}, name="empty_i32"),
    Case("randperm", [], attrs={"n": -1}, name="negative",
         error="randperm: n must be non-negative, got -1"),
]
