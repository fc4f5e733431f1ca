"""Rows for cast, clone and fill."""
import torch

from oracle import Case, bools, ints, randn, uniform, values

CASES = [
    Case("cast", [uniform(-3, 3, 2, 3)], lambda x: x.to(torch.int64),
         attrs={"dtype": "int64"}, name="f32_to_i64"),
    Case("cast", [ints(-3, 3, 4, layout="strided")], lambda x: x.to(torch.float64),
         attrs={"dtype": "float64"}, name="i64_to_f64_strided"),
    Case("cast", [values([0.0, 0.5, -1.0])], lambda x: x.to(torch.bool),
         attrs={"dtype": "bool"}, name="f32_to_bool"),
    Case("cast", [bools(3, 2, layout="transposed")], lambda x: x.to(torch.int32),
         attrs={"dtype": "int32"}, name="bool_to_i32_transposed"),
    Case("cast", [randn(0, 3)], lambda x: x.to(torch.float64), attrs={"dtype": "float64"},
         name="empty"),
    Case("cast", [randn()], lambda x: x.to(torch.float64), attrs={"dtype": "float64"},
         name="zero_dim"),
    Case("cast", [randn(2)], attrs={"dtype": "complex64"}, name="bad_dtype",
         error="unknown dtype 'complex64'"),
    Case("clone", [randn(3, 4, layout="transposed")], lambda x: x.clone(), name="transposed"),
    Case("clone", [randn(2, 3, layout="expanded")], lambda x: x.clone(), name="expanded"),
    Case("fill", [randn(2, 3)], lambda x: torch.full_like(x, 2.5), attrs={"value": 2.5}),
    # The filled value ignores x, so x's gradient is zero (x * 0 + v has the same).
    Case("fill", [randn(2, 3)], lambda x: x * 0 + 2.5, attrs={"value": 2.5}, name="grad"),
    Case("fill", [ints(0, 5, 3)], lambda x: torch.full_like(x, 7), attrs={"int_value": 7},
         name="int"),
]
