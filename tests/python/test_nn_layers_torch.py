"""kiln's Conv1d, transposed convolutions, padding and resampling layers
and their functions against torch's (issue 23): outputs and gradients
(float64 to rounding, float32 to ~1e-5) over several argument sets, reprs,
state_dict keys, parameter init, errors, and that each layer traces and
hybridizes to its eager result."""
import math

import numpy as np
import pytest
import torch

import kiln
from kiln import nn
from kiln.nn import functional as F
from nn_torch_helpers import (
    check_traced_and_hybridized,
    compare,
    compare_modules,
    inputs,
)

TF = torch.nn.functional
BOTH = [np.float64, np.float32]

# -- convolutions -------------------------------------------------------------

CONV1D = [
    dict(in_channels=4, out_channels=6, kernel_size=3),
    dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1, dilation=2, groups=2),
    dict(in_channels=4, out_channels=4, kernel_size=4, padding="same", bias=False),
    dict(in_channels=4, out_channels=6, kernel_size=3, padding="valid"),
    dict(in_channels=4, out_channels=6, kernel_size=3, padding=2, padding_mode="reflect"),
    dict(in_channels=4, out_channels=6, kernel_size=3, padding=1, padding_mode="replicate"),
    dict(in_channels=4, out_channels=6, kernel_size=3, padding=3, padding_mode="circular"),
    dict(in_channels=4, out_channels=6, kernel_size=4, padding="same", dilation=1,
         padding_mode="reflect"),
]
CONV_TRANSPOSE1D = [
    dict(in_channels=4, out_channels=6, kernel_size=3),
    dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1, output_padding=1,
         groups=2),
    dict(in_channels=4, out_channels=2, kernel_size=4, stride=3, dilation=2, bias=False),
]
CONV_TRANSPOSE2D = [
    dict(in_channels=4, out_channels=6, kernel_size=3),
    dict(in_channels=4, out_channels=6, kernel_size=(3, 2), stride=(2, 1), padding=(1, 0),
         output_padding=(1, 0), groups=2),
    dict(in_channels=4, out_channels=4, kernel_size=3, stride=2, dilation=2, bias=False),
]
CONV_MODULES = ([("Conv1d", kw, (2, 4, 9)) for kw in CONV1D]
                + [("ConvTranspose1d", kw, (2, 4, 7)) for kw in CONV_TRANSPOSE1D]
                + [("ConvTranspose2d", kw, (2, 4, 5, 6)) for kw in CONV_TRANSPOSE2D])


def conv_pair(name, kwargs):
    return getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("name, kwargs, shape", CONV_MODULES)
def test_conv_module_matches_torch(name, kwargs, shape, dtype):
    ours, theirs = conv_pair(name, kwargs)
    assert repr(ours) == repr(theirs)
    compare_modules(ours, theirs, inputs(shape, dtype), dtype)


@pytest.mark.parametrize("name, kwargs, shape", CONV_MODULES[:3] + CONV_MODULES[-2:])
def test_conv_module_unbatched_input(name, kwargs, shape):
    ours, theirs = conv_pair(name, kwargs)
    compare_modules(ours, theirs, inputs(shape[1:]))


@pytest.mark.parametrize("name, kwargs, shape", CONV_MODULES)
def test_conv_module_traces_and_hybridizes(name, kwargs, shape):
    check_traced_and_hybridized(getattr(nn, name)(**kwargs), inputs(shape, np.float32))


@pytest.mark.parametrize("name, kwargs, shape", CONV_MODULES)
def test_conv_init_follows_torch(name, kwargs, shape):
    """kaiming_uniform_(a=sqrt(5)) and U(±1/sqrt(fan_in)): torch's shapes
    and bounds, and values that fill them."""
    kiln.manual_seed(0)
    ours, theirs = conv_pair(name, kwargs)
    for (kname, kp), (tname, tp) in zip(ours.named_parameters(), theirs.named_parameters(),
                                        strict=True):
        assert kname == tname and tuple(kp.shape) == tuple(tp.shape)
        fan_in = theirs.weight.shape[1] * math.prod(theirs.weight.shape[2:])
        bound = 1 / math.sqrt(fan_in)
        values = np.abs(kp.detach().numpy())
        assert values.max() <= bound and values.max() > 0.5 * bound
    kiln.manual_seed(0)
    again, _ = conv_pair(name, kwargs)
    np.testing.assert_array_equal(again.weight.detach().numpy(), ours.weight.detach().numpy())


@pytest.mark.parametrize("output_size", [[12, 11], [2, 6, 12, 12], (11, 12)])
def test_conv_transpose2d_output_size(output_size):
    ours, theirs = conv_pair("ConvTranspose2d", dict(in_channels=4, out_channels=6,
                                                    kernel_size=3, stride=2, padding=0))
    y = compare_modules(ours, theirs, inputs((2, 4, 5, 5)), output_size=output_size)
    assert tuple(y.shape[-2:]) == tuple(output_size[-2:])
    check_traced_and_hybridized(ours, inputs((2, 4, 5, 5)), output_size=output_size)


def test_conv_transpose1d_output_size_and_its_errors():
    ours, theirs = conv_pair("ConvTranspose1d", dict(in_channels=4, out_channels=2,
                                                    kernel_size=3, stride=3))
    compare_modules(ours, theirs, inputs((2, 4, 5)), output_size=[17])
    compare_modules(ours, theirs, inputs((4, 5)), output_size=[2, 16])
    x = kiln.tensor(inputs((2, 4, 5), np.float32))
    with pytest.raises(ValueError, match=r"requested an output size of \[18\], but valid sizes "
                                         r"range from \[15\] to \[17\]"):
        ours(x, output_size=[18])
    with pytest.raises(ValueError, match="output_size must have 1 or 3 elements"):
        ours(x, output_size=[2, 17])


PADDED_CONV2D = [
    dict(padding="same"), dict(padding="same", dilation=(1, 2)), dict(padding="valid"),
    dict(padding="same", groups=2),
]


@pytest.mark.parametrize("kwargs", PADDED_CONV2D)
def test_functional_conv2d_string_padding(kwargs):
    groups = kwargs.get("groups", 1)
    w = inputs((6, 4 // groups, 4, 3), seed=1)
    b = inputs((6,), seed=2)
    compare(lambda x, w, b: F.conv2d(x, w, b, **kwargs),
            lambda x, w, b: TF.conv2d(x, w, b, **kwargs), [inputs((2, 4, 6, 7)), w, b])


CONV_FUNCTIONS = [
    ("conv1d", (2, 4, 9), (6, 2, 3), dict(stride=2, padding=1, dilation=2, groups=2)),
    ("conv1d", (4, 9), (6, 4, 4), dict(padding="same")),
    ("conv1d", (2, 4, 9), (6, 4, 3), dict(padding=(2,), stride=(3,))),
    ("conv_transpose1d", (2, 4, 7), (4, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose1d", (2, 4, 7), (4, 1, 3), dict(groups=2, dilation=3)),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 3, 3, 2),
     dict(stride=(2, 1), padding=(1, 0), output_padding=(1, 0), dilation=(1, 2))),
    ("conv_transpose2d", (4, 5, 6), (4, 2, 2, 2), dict(stride=2, groups=2)),
]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("name, x_shape, w_shape, kwargs", CONV_FUNCTIONS)
def test_functional_convolutions_match_torch(name, x_shape, w_shape, kwargs, dtype):
    out_channels = w_shape[0] if name == "conv1d" else w_shape[1] * kwargs.get("groups", 1)
    arrays = [inputs(x_shape), inputs(w_shape, seed=1), inputs((out_channels,), seed=2)]
    compare(lambda x, w, b: getattr(F, name)(x, w, b, **kwargs),
            lambda x, w, b: getattr(TF, name)(x, w, b, **kwargs), arrays, dtype)


CONV_ERRORS = [
    (lambda: nn.Conv1d(4, 6, 3, groups=0), ValueError, "groups must be a positive integer"),
    (lambda: nn.Conv1d(3, 6, 3, groups=2), ValueError, "in_channels must be divisible by groups"),
    (lambda: nn.Conv1d(4, 5, 3, groups=2), ValueError,
     "out_channels must be divisible by groups"),
    (lambda: nn.Conv1d(4, 6, 3, padding="full"), ValueError, "Invalid padding string 'full'"),
    (lambda: nn.Conv1d(4, 6, 3, stride=2, padding="same"), ValueError,
     "padding='same' is not supported for strided convolutions"),
    (lambda: nn.Conv1d(4, 6, 3, padding_mode="wrap"), ValueError,
     "padding_mode must be one of .* but got padding_mode='wrap'"),
    (lambda: nn.ConvTranspose2d(4, 6, 3, padding_mode="reflect"), ValueError,
     'Only "zeros" padding mode is supported for ConvTranspose2d'),
    (lambda: F.conv1d(kiln.ones(1, 3, 5), kiln.ones(4, 2, 3)), RuntimeError,
     r"expected input\[1, 3, 5\] to have 2 channels, but got 3 channels instead"),
    (lambda: F.conv1d(kiln.ones(1, 3, 5), kiln.ones(4, 3, 3), stride=2, padding="same"),
     RuntimeError, "padding='same' is not supported for strided convolutions"),
    (lambda: F.conv2d(kiln.ones(1, 3, 5, 5), kiln.ones(4, 3, 3, 3), padding="full"),
     RuntimeError, "invalid padding string: 'full'"),
    (lambda: F.conv1d(kiln.ones(1, 1, 3, 5), kiln.ones(4, 1, 3)), RuntimeError,
     r"expected 2-D \(unbatched\) or 3-D \(batched\) input, got shape \[1, 1, 3, 5\]"),
    (lambda: F.conv_transpose1d(kiln.ones(1, 3, 5), kiln.ones(4, 2, 3)), RuntimeError,
     "to have 4 channels, but got 3 channels instead"),
    (lambda: F.conv_transpose1d(kiln.ones(1, 4, 5), kiln.ones(4, 2, 3), stride=(1, 2)),
     RuntimeError, r"expected stride to be a single integer value .* stride=\[1, 2\]"),
    (lambda: F.conv_transpose2d(kiln.ones(1, 4, 5, 5), kiln.ones(4, 2, 3, 3), output_padding=1),
     RuntimeError, "output padding must be smaller than either stride or dilation"),
]


@pytest.mark.parametrize("make, error, message", CONV_ERRORS)
def test_convolution_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


# -- padding ------------------------------------------------------------------

PADS = [
    ((2, 3, 6), (1, 2)), ((2, 3, 6), (0, 3)), ((3, 6), (2, 1)), ((2, 3, 5, 6), (1, 2, 2, 1)),
    ((3, 5, 6), (2, 0, 0, 2)),
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape, pad", PADS)
def test_functional_pad_matches_torch(shape, pad, mode):
    compare(lambda x: F.pad(x, pad, mode), lambda x: TF.pad(x, pad, mode), [inputs(shape)])


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_non_constant_pad_of_a_4d_input_by_one_pair_is_refused_as_in_torch(mode):
    with pytest.raises(NotImplementedError, match="padding size 2 is not supported for 4D input"):
        F.pad(kiln.ones(2, 3, 5, 6), (1, 1), mode)


@pytest.mark.parametrize("pad, value", [((-1, 2, 1, 0), 1.5), ((1, 1, -2, 1), -3.0),
                                        ((0, 0, 1, 1, 1, 0), None), ((1, 1), 0.5)])
def test_functional_pad_constant_value_and_cropping(pad, value):
    compare(lambda x: F.pad(x, pad, value=value), lambda x: TF.pad(x, pad, value=value),
            [inputs((2, 3, 5, 6))], np.float32)


PAD_MODULES = [
    ("ZeroPad1d", (2,), (2, 3, 6)), ("ZeroPad1d", ((1, 3),), (3, 6)),
    ("ZeroPad2d", (2,), (2, 3, 5, 6)), ("ZeroPad2d", ((1, 0, 2, 3),), (3, 5, 6)),
    ("ConstantPad1d", (2, 3.5), (2, 3, 6)), ("ConstantPad1d", ((1, 2), -1.0), (2, 3, 6)),
    ("ConstantPad2d", (1, 0.0), (2, 3, 5, 6)), ("ConstantPad2d", ((1, 2, 0, 1), 2.0), (3, 5, 6)),
    ("ReflectionPad1d", (2,), (2, 3, 6)), ("ReflectionPad1d", ((3, 1),), (3, 6)),
    ("ReflectionPad2d", (1,), (2, 3, 5, 6)), ("ReflectionPad2d", ((1, 2, 3, 0),), (3, 5, 6)),
    ("ReplicationPad1d", (4,), (2, 3, 6)), ("ReplicationPad1d", ((0, 2),), (3, 6)),
    ("ReplicationPad2d", (2,), (2, 3, 5, 6)), ("ReplicationPad2d", ((1, 0, 2, 3),), (3, 5, 6)),
    ("CircularPad1d", (2,), (2, 3, 6)), ("CircularPad2d", ((1, 2, 0, 1),), (2, 3, 5, 6)),
]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("name, args, shape", PAD_MODULES)
def test_padding_module_matches_torch(name, args, shape, dtype):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    compare(ours, theirs, [inputs(shape)], dtype)


@pytest.mark.parametrize("name, args, shape", PAD_MODULES[::3])
def test_padding_module_traces_and_hybridizes(name, args, shape):
    check_traced_and_hybridized(getattr(nn, name)(*args), inputs(shape, np.float32))


PAD_ERRORS = [
    (lambda: F.pad(kiln.ones(1, 2, 4), (1, 2, 3)), RuntimeError,
     "padding length must be divisible by 2"),
    (lambda: F.pad(kiln.ones(1, 2, 4), (4, 0), mode="reflect"), RuntimeError,
     "padding size should be less than the corresponding input dimension"),
    (lambda: F.pad(kiln.ones(1, 2, 4), (1, 0), mode="reflect", value=1.0), RuntimeError,
     "padding mode \"reflect\" doesn't take in value argument"),
    (lambda: F.pad(kiln.ones(1, 2, 4), (1, 0), mode="wrap"), NotImplementedError,
     "unrecognised padding mode wrap"),
    (lambda: F.pad(kiln.ones(1, 2, 4), (1,) * 8), RuntimeError,
     "padding length should be less than or equal to two times the input dimension"),
    (lambda: nn.CircularPad2d(1)(kiln.ones(4, 4)), ValueError,
     r"expected 3D or 4D input \(got 2D input\)"),
]


@pytest.mark.parametrize("make, error, message", PAD_ERRORS)
def test_padding_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


# -- resampling ---------------------------------------------------------------

INTERPOLATE_4D = [
    dict(size=(8, 9)), dict(size=4), dict(size=(8, 9), mode="nearest-exact"),
    dict(size=(8, 9), mode="bilinear"), dict(size=(3, 4), mode="bilinear", align_corners=True),
    dict(scale_factor=2), dict(scale_factor=(1.5, 0.5)), dict(scale_factor=0.5),
    dict(scale_factor=(1.5, 0.5), mode="bilinear"),
    dict(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
    dict(scale_factor=1.7, mode="nearest-exact"),
    dict(scale_factor=2.5, mode="bilinear", align_corners=True),
]
INTERPOLATE_3D = [
    dict(size=11, mode="linear"), dict(size=(4,), mode="linear", align_corners=True),
    dict(scale_factor=2.5, mode="linear", align_corners=True), dict(scale_factor=3),
    dict(size=4, mode="nearest-exact"), dict(scale_factor=1.3, recompute_scale_factor=True),
]


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("shape, kwargs", [((2, 3, 5, 7), kw) for kw in INTERPOLATE_4D]
                         + [((2, 3, 7), kw) for kw in INTERPOLATE_3D])
def test_interpolate_matches_torch(shape, kwargs, dtype):
    compare(lambda x: F.interpolate(x, **kwargs), lambda x: TF.interpolate(x, **kwargs),
            [inputs(shape)], dtype)


UPSAMPLE = [
    ("Upsample", dict(scale_factor=2)), ("Upsample", dict(size=(3, 4), mode="bilinear")),
    ("Upsample", dict(scale_factor=(2, 3), mode="nearest-exact")),
    ("Upsample", dict(size=9, mode="bilinear", align_corners=True)),
    ("UpsamplingNearest2d", dict(scale_factor=2)), ("UpsamplingNearest2d", dict(size=(7, 3))),
    ("UpsamplingBilinear2d", dict(size=5)), ("UpsamplingBilinear2d", dict(scale_factor=1.5)),
]


@pytest.mark.parametrize("name, kwargs", UPSAMPLE)
def test_upsample_modules_match_torch(name, kwargs):
    ours, theirs = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == []
    compare(ours, theirs, [inputs((2, 3, 4, 5))])
    check_traced_and_hybridized(ours, inputs((2, 3, 4, 5), np.float32))


def test_upsample_linear_module_on_3d_input():
    ours = nn.Upsample(scale_factor=2.0, mode="linear")
    theirs = torch.nn.Upsample(scale_factor=2.0, mode="linear")
    compare(ours, theirs, [inputs((2, 3, 6))])


@pytest.mark.parametrize("name, mode", [("upsample", "bilinear"), ("upsample_nearest", None),
                                        ("upsample_bilinear", None)])
def test_deprecated_upsample_functions_warn_and_match(name, mode):
    kwargs = {"mode": mode} if mode else {}
    with pytest.warns(UserWarning, match=f"nn.functional.{name}` is deprecated"):
        compare(lambda x: getattr(F, name)(x, scale_factor=2, **kwargs),
                lambda x: getattr(TF, name)(x, scale_factor=2, **kwargs),
                [inputs((1, 2, 3, 4))])


PIXEL = [
    ("pixel_shuffle", (2, 8, 3, 5), 2), ("pixel_shuffle", (9, 2, 2), 3),
    ("pixel_shuffle", (2, 2, 4, 3, 3), 2), ("pixel_unshuffle", (2, 2, 6, 4), 2),
    ("pixel_unshuffle", (3, 6, 9), 3),
]


@pytest.mark.parametrize("name, shape, factor", PIXEL)
def test_pixel_shuffle_functions_and_modules_match_torch(name, shape, factor):
    compare(lambda x: getattr(F, name)(x, factor), lambda x: getattr(TF, name)(x, factor),
            [inputs(shape)])
    module_name = "PixelShuffle" if name == "pixel_shuffle" else "PixelUnshuffle"
    ours, theirs = getattr(nn, module_name)(factor), getattr(torch.nn, module_name)(factor)
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, [inputs(shape)], np.float32)
    check_traced_and_hybridized(ours, inputs(shape, np.float32))


RESAMPLE_ERRORS = [
    (lambda x: F.interpolate(x, size=2, scale_factor=2), ValueError,
     "only one of size or scale_factor should be defined"),
    (lambda x: F.interpolate(x), ValueError, "either size or scale_factor should be defined"),
    (lambda x: F.interpolate(x, size=2, align_corners=True), ValueError,
     "align_corners option can only be set with the interpolating modes"),
    (lambda x: F.interpolate(x[0], size=2, mode="bilinear"), NotImplementedError,
     "got 3D input, but bilinear mode needs 4D input"),
    (lambda x: F.interpolate(x, size=2, mode="linear"), NotImplementedError,
     "got 4D input, but linear mode needs 3D input"),
    (lambda x: F.interpolate(x[0, 0], size=2), NotImplementedError,
     r"only 3D, 4D and 5D input tensors supported \(got 2D\)"),
    (lambda x: F.interpolate(x, size=(2, 2, 2)), ValueError,
     "input and output must have the same number of spatial dimensions"),
    (lambda x: F.interpolate(x, size=2, recompute_scale_factor=True), ValueError,
     "recompute_scale_factor is not meaningful with an explicit size"),
    (lambda x: F.interpolate(x, size=2, mode="bilinear", antialias=True), NotImplementedError,
     "antialias=True is not supported"),
    (lambda x: F.pixel_shuffle(x, 2), RuntimeError,
     r"'channel' dimension to be divisible by the square of upscale_factor, but "
     r"input.size\(-3\)=6 is not divisible by 4"),
    (lambda x: F.pixel_unshuffle(x, 3), RuntimeError,
     r"expects height to be divisible by downscale_factor, but input.size\(-2\)=4"),
    (lambda x: F.pixel_shuffle(x[0, 0], 2), RuntimeError,
     "expects input to have at least 3 dimensions, but got input with 2 dimension"),
]


@pytest.mark.parametrize("make, error, message", RESAMPLE_ERRORS)
def test_resampling_errors(make, error, message):
    with pytest.raises(error, match=message):
        make(kiln.ones(1, 6, 4, 4))
