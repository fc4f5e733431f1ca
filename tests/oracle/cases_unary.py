"""Rows for the one-input elementwise ops: math, activations, logical_not, clamp."""
import torch
import torch.nn.functional as F

from oracle import Case, bools, ints, randn, uniform, values

INF, NAN = float("inf"), float("nan")

# Op name -> (PyTorch function, a generator of valid inputs of the given shape).
FLOAT_MATH = {
    "exp": (torch.exp, lambda *s, **kw: randn(*s, **kw)),
    "log": (torch.log, lambda *s, **kw: uniform(0.05, 5, *s, **kw)),
    "sqrt": (torch.sqrt, lambda *s, **kw: uniform(0, 5, *s, **kw)),
    "rsqrt": (torch.rsqrt, lambda *s, **kw: uniform(0.05, 5, *s, **kw)),
    "sin": (torch.sin, lambda *s, **kw: uniform(-6, 6, *s, **kw)),
    "cos": (torch.cos, lambda *s, **kw: uniform(-6, 6, *s, **kw)),
    "tanh": (torch.tanh, lambda *s, **kw: uniform(-4, 4, *s, **kw)),
    "sigmoid": (torch.sigmoid, lambda *s, **kw: uniform(-8, 8, *s, **kw)),
}

# Values where the op meets its edges: overflow, poles, domain errors, NaN.
SPECIAL = {
    "exp": [-200.0, -103.0, -87.5, -1e-3, 0.0, 1e-3, 88.0, 88.7, 89.0, 200.0, INF, -INF, NAN],
    "log": [0.0, -0.0, -1.0, 1e-30, 1.0, 1e30, INF, -INF, NAN],
    "sqrt": [0.0, -1.0, 1e-30, 4.0, 1e30, INF, -INF, NAN],
    "rsqrt": [0.0, -1.0, 1e-30, 4.0, 1e30, INF, NAN],
    "sin": [0.0, 1e-20, 3.14159265, 100.0, 1e4, INF, NAN],
    "cos": [0.0, 1e-20, 3.14159265, 100.0, 1e4, INF, NAN],
    "tanh": [-100.0, -9.0, -1.0, -0.3, -1e-4, 0.0, 1e-4, 0.3, 0.6, 5.0, 9.0, 100.0, INF, -INF, NAN],
    "sigmoid": [-200.0, -100.0, -88.0, -20.0, -1e-4, 0.0, 1e-4, 20.0, 88.0, 200.0, INF, -INF, NAN],
}

CASES = []
for name, (fn, gen) in FLOAT_MATH.items():
    CASES += [
        Case(name, [gen(3, 5)], fn, name="f32"),
        Case(name, [gen(4, 3, dtype="float64", layout="transposed")], fn, name="f64_transposed"),
        Case(name, [gen(3, 4, layout="strided")], fn, name="f32_strided"),
        Case(name, [gen(3, 4, layout="expanded")], fn, name="f32_expanded"),
        Case(name, [gen(2000)], fn, name="f32_long"),  # past one SIMD tail
        Case(name, [ints(0, 6, 2, 3)], fn, name="int64_to_f32"),
        Case(name, [ints(1, 6, 5, dtype="int32")], fn, name="int32_to_f32"),
        Case(name, [bools(4)], fn, name="bool_to_f32"),
        Case(name, [randn(0, 3)], fn, name="empty"),
        Case(name, [gen()], fn, name="zero_dim"),
        # Infinities and NaN: the gradients are compared with PyTorch's, but
        # finite differences there are meaningless (fd=False).
        Case(name, [values(SPECIAL[name])], fn, name="special_f32", fd=False),
        Case(name, [values(SPECIAL[name], dtype="float64")], fn, name="special_f64", fd=False),
    ]

# Wide sweeps: the float32 exp/sigmoid/tanh kernels are vectorized
# approximations, so they are checked over the whole useful range.
CASES += [
    # Outputs up to e^89 ~ 4e38: a float64 finite difference of their sum
    # cannot resolve a 1e-6 step, so only PyTorch's gradient is compared.
    Case("exp", [uniform(-104, 89, 4096)], torch.exp, name="sweep_f32", fd=False),
    Case("sigmoid", [uniform(-110, 110, 4096)], torch.sigmoid, name="sweep_f32"),
    Case("tanh", [uniform(-12, 12, 4096)], torch.tanh, name="sweep_f32"),
    Case("tanh", [uniform(-0.7, 0.7, 4096)], torch.tanh, name="sweep_small_f32"),
]

CASES += [
    Case("neg", [randn(3, 4)], torch.neg, name="f32"),
    Case("neg", [randn(3, 4, dtype="float64", layout="transposed")], torch.neg, name="f64"),
    Case("neg", [ints(-5, 5, 3, 4, layout="strided")], torch.neg, name="int64_strided"),
    Case("neg", [ints(-5, 5, 6, dtype="int32")], torch.neg, name="int32"),
    Case("neg", [randn(0)], torch.neg, name="empty"),
    Case("neg", [bools(3)], name="bool", error="neg: negation, the `-` operator, on a bool"),
    Case("abs", [randn(3, 4, layout="expanded")], torch.abs, name="f32_expanded"),
    Case("abs", [values([-0.0, -INF, NAN, 2.5], dtype="float64")], torch.abs, name="special",
         fd=False),
    Case("abs", [ints(-5, 5, 2, 3, dtype="int32", layout="transposed")], torch.abs, name="int32"),
    Case("abs", [bools(3)], name="bool", error="abs: not supported for bool input"),
    Case("relu", [randn(3, 4)], torch.relu, name="f32"),
    Case("relu", [randn(4, 3, dtype="float64", layout="transposed")], torch.relu, name="f64"),
    Case("relu", [values([NAN, -INF, INF, -0.0, 1.0])], torch.relu, name="special", fd=False),
    Case("relu", [ints(-5, 5, 3, 4, layout="strided")], torch.relu, name="int64"),
    Case("relu", [randn(0, 2)], torch.relu, name="empty"),
    Case("relu", [bools(3)], name="bool", error="relu: not supported for bool input"),
]

CASES += [
    Case("leaky_relu", [randn(3, 4)], F.leaky_relu, name="f32"),
    Case("leaky_relu", [randn(3, 4, dtype="float64", layout="strided")],
         lambda x: F.leaky_relu(x, 0.2), attrs={"negative_slope": 0.2}, name="f64_slope"),
    Case("leaky_relu", [ints(-3, 3, 4)], name="int", error="leaky_relu: expected a floating input"),
    Case("gelu", [uniform(-6, 6, 3, 5)], F.gelu, name="f32"),
    Case("gelu", [uniform(-6, 6, 5, 3, dtype="float64", layout="transposed")], F.gelu,
         name="f64"),
    Case("gelu", [uniform(-6, 6, 3, 5, layout="expanded")], lambda x: F.gelu(x, approximate="tanh"),
         attrs={"approximate": "tanh"}, name="tanh_f32"),
    Case("gelu", [uniform(-6, 6, 7, dtype="float64")], lambda x: F.gelu(x, approximate="tanh"),
         attrs={"approximate": "tanh"}, name="tanh_f64"),
    # Element by element: PyTorch's vectorized gelu gives NaN for +inf where
    # its scalar path (and the math: x Φ(x) -> x) gives +inf, and which of
    # the two a row of five meets depends on the CPU's vector width.
    Case("gelu", [values([-INF, INF, NAN, -40.0, 40.0])],
         lambda x: torch.stack([F.gelu(v.reshape(1))[0] for v in x]), name="special", fd=False),
    Case("gelu", [randn(3)], attrs={"approximate": "erf"}, name="bad_approximate",
         error="gelu: approximate must be 'none' or 'tanh', got 'erf'"),
    Case("gelu", [ints(-3, 3, 4)], name="int", error="gelu: expected a floating input, got int64"),
    Case("elu", [randn(3, 4)], F.elu, name="f32"),
    Case("elu", [randn(3, 4, dtype="float64", layout="transposed")],
         lambda x: F.elu(x, alpha=0.5), attrs={"alpha": 0.5}, name="f64_alpha"),
    Case("elu", [values([-100.0, -INF, INF, NAN])], F.elu, name="special", fd=False),
    Case("elu", [bools(3)], name="bool", error="elu: expected a floating input, got bool"),
    Case("softplus", [randn(3, 4)], F.softplus, name="f32"),
    Case("softplus", [uniform(-4, 4, 3, 4, dtype="float64", layout="strided")],
         lambda x: F.softplus(x, beta=2.0, threshold=5.0), attrs={"beta": 2.0, "threshold": 5.0},
         name="f64_beta_threshold"),
    Case("softplus", [values([-200.0, -20.0, 0.0, 19.9, 20.1, 100.0, 1e30, -INF, INF, NAN])],
         F.softplus, name="special", fd=False),
    Case("softplus", [ints(0, 3, 3)], name="int", error="softplus: expected a floating input"),
]

# Gradients at the kinks follow PyTorch's conventions (relu and abs give 0
# at 0, leaky_relu the slope, clamp passes the gradient at a bound); finite
# differences straddle the kink there, so they are off (fd=False).
CASES += [
    Case("relu", [values([-1.0, 0.0, -0.0, 2.0], dtype="float64")], torch.relu, name="kink",
         fd=False),
    Case("abs", [values([-1.5, 0.0, -0.0, 2.0], dtype="float64")], torch.abs, name="kink",
         fd=False),
    Case("abs", [randn(4, 3, dtype="float64", layout="transposed")], torch.abs, name="f64"),
    Case("leaky_relu", [values([-1.0, 0.0, 2.0])], F.leaky_relu, name="kink", fd=False),
    Case("clamp", [values([-1.0, -0.5, 0.0, 0.5, 1.0], dtype="float64")],
         lambda x: torch.clamp(x, -0.5, 0.5), attrs={"min": -0.5, "max": 0.5}, name="at_bounds",
         fd=False),
    Case("gelu", [values([0.0, -1e-3, 1e-3, 3.0], dtype="float64")], F.gelu, name="near_zero"),
    Case("elu", [values([-1e-3, 0.0, 1e-3], dtype="float64")], F.elu, name="near_zero"),
    Case("softplus", [uniform(-30, 30, 4, 5, dtype="float64")], F.softplus, name="f64_wide"),
]

CASES += [
    Case("logical_not", [values([0.0, -0.0, 1.5, NAN, INF])], torch.logical_not, name="f32",
         grad=False),
    Case("logical_not", [ints(-2, 2, 3, 4, layout="transposed")], torch.logical_not,
         name="int64", grad=False),
    Case("logical_not", [bools(3, 4, layout="strided")], torch.logical_not, name="bool",
         grad=False),
    Case("logical_not", [randn(0, 3, dtype="float64")], torch.logical_not, name="empty",
         grad=False),
]

CASES += [
    Case("clamp", [randn(3, 4)], lambda x: torch.clamp(x, -0.5, 0.5),
         attrs={"min": -0.5, "max": 0.5}, name="f32"),
    Case("clamp", [randn(4, 3, dtype="float64", layout="transposed")],
         lambda x: torch.clamp(x, min=0.25), attrs={"min": 0.25}, name="f64_min_only"),
    Case("clamp", [randn(3, 4, layout="strided")], lambda x: torch.clamp(x, max=0.25),
         attrs={"max": 0.25}, name="max_only"),
    Case("clamp", [randn(3, 4)], lambda x: torch.clamp(x, 1.0, -1.0),
         attrs={"min": 1.0, "max": -1.0}, name="min_above_max"),
    Case("clamp", [values([NAN, -INF, INF, 0.3])], lambda x: torch.clamp(x, 0.0, 1.0),
         attrs={"min": 0.0, "max": 1.0}, name="special", fd=False),
    Case("clamp", [ints(-9, 9, 3, 4, layout="expanded")], lambda x: torch.clamp(x, -3, 4),
         attrs={"min": -3, "max": 4}, name="int64_whole_bounds"),
    Case("clamp", [ints(-9, 9, 6, dtype="int32")], lambda x: torch.clamp(x, min=0),
         attrs={"min": 0}, name="int32_min_only"),
    Case("clamp", [ints(-9, 9, 6)], lambda x: torch.clamp(x, min=0.5),
         attrs={"min": 0.5}, name="int64_fractional_bound_to_f32"),
    Case("clamp", [bools(5)], lambda x: torch.clamp(x, min=0, max=1),
         attrs={"min": 0, "max": 1}, name="bool_to_int64"),
    Case("clamp", [randn(0, 4)], lambda x: torch.clamp(x, min=0.0), attrs={"min": 0.0},
         name="empty"),
    Case("clamp", [randn(3)], name="no_bounds",
         error="clamp: at least one of 'min' or 'max' must not be None"),
]

# The float tests: any dtype in, bool out (integers and bools are finite).
FLOAT_TESTS = {"isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite}
CLASSIFY_VALUES = [NAN, INF, -INF, 0.0, -0.0, 1e-45, 3.4e38, -2.5]
for name, fn in FLOAT_TESTS.items():
    CASES += [
        Case(name, [values(CLASSIFY_VALUES)], fn, name="special_f32", grad=False),
        Case(name, [values(CLASSIFY_VALUES + [1e300, -1e308], dtype="float64", shape=(2, 5),
                           layout="transposed")], fn, name="special_f64_transposed", grad=False),
        Case(name, [randn(3, 4, layout="strided")], fn, name="f32_strided", grad=False),
        Case(name, [ints(-5, 5, 3, 4, dtype="int32", layout="expanded")], fn, name="int32",
             grad=False),
        Case(name, [ints(-5, 5, 6)], fn, name="int64", grad=False),
        Case(name, [bools(2, 3)], fn, name="bool", grad=False),
        Case(name, [randn(0, 2)], fn, name="empty", grad=False),
    ]

# nan_to_num: unset bounds are the dtype's largest and lowest finite values;
# a bound beyond float32's range becomes an infinity there.
NAN_TO_NUM_VALUES = [NAN, INF, -INF, 0.5, -2.0, 0.0]
CASES += [
    Case("nan_to_num", [values(NAN_TO_NUM_VALUES)], torch.nan_to_num, name="defaults_f32",
         fd=False),
    Case("nan_to_num", [values(NAN_TO_NUM_VALUES, dtype="float64", shape=(2, 3),
                               layout="transposed")],
         torch.nan_to_num, name="defaults_f64", fd=False),
    Case("nan_to_num", [values(NAN_TO_NUM_VALUES, dtype="float64")],
         lambda x: torch.nan_to_num(x, nan=1.5, posinf=100.0, neginf=-7.0),
         attrs={"nan": 1.5, "posinf": 100.0, "neginf": -7.0}, name="f64_given", fd=False),
    Case("nan_to_num", [values(NAN_TO_NUM_VALUES)],
         lambda x: torch.nan_to_num(x, posinf=1e300, neginf=-1e300),
         attrs={"posinf": 1e300, "neginf": -1e300}, name="f32_bound_overflows", fd=False),
    Case("nan_to_num", [randn(3, 4, dtype="float64", layout="strided")], torch.nan_to_num,
         name="f64_finite"),
    Case("nan_to_num", [ints(-5, 5, 3, 4, dtype="int32")], torch.nan_to_num, name="int32"),
    Case("nan_to_num", [ints(-5, 5, 2, 3, layout="expanded")],
         lambda x: torch.nan_to_num(x, nan=3.0), attrs={"nan": 3.0}, name="int64"),
    Case("nan_to_num", [bools(4)], torch.nan_to_num, name="bool"),
    Case("nan_to_num", [randn(0, 3)], torch.nan_to_num, name="empty"),
]

# Roundings: integers pass through, bool is refused; round is half to even.
# The gradient is zero (PyTorch's), which finite differences away from the
# steps confirm.
ROUNDINGS = {"floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
             "trunc": torch.trunc}
ROUNDING_VALUES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.7, -2.7, -0.0, 1e20, INF, -INF, NAN]
for name, fn in ROUNDINGS.items():
    CASES += [
        Case(name, [uniform(-5, 5, 3, 4)], fn, name="f32"),
        Case(name, [uniform(-5, 5, 4, 3, dtype="float64", layout="transposed")], fn,
             name="f64_transposed"),
        Case(name, [uniform(-5, 5, 2, 3, 4, layout="expanded")], fn, name="f32_expanded"),
        Case(name, [values(ROUNDING_VALUES)], fn, name="special_f32", fd=False),
        Case(name, [values(ROUNDING_VALUES, dtype="float64")], fn, name="special_f64", fd=False),
        Case(name, [ints(-9, 9, 3, 4, layout="strided")], fn, name="int64"),
        Case(name, [ints(-9, 9, 5, dtype="int32")], fn, name="int32"),
        Case(name, [randn(0, 2)], fn, name="empty"),
        Case(name, [bools(3)], name="bool", error=f"{name}: not supported for bool input"),
    ]

CASES += [
    Case("sign", [values([NAN, -0.0, 0.0, -3.5, 2.0, INF, -INF])], torch.sign,
         name="special_f32", fd=False),
    Case("sign", [randn(4, 3, dtype="float64", layout="transposed")], torch.sign, name="f64"),
    Case("sign", [ints(-3, 3, 3, 4, layout="strided")], torch.sign, name="int64"),
    Case("sign", [ints(-3, 3, 6, dtype="int32")], torch.sign, name="int32"),
    Case("sign", [bools(2, 3)], torch.sign, name="bool"),
    Case("sign", [randn(0)], torch.sign, name="empty"),
]
