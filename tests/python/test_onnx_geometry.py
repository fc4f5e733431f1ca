"""ONNX's CenterCropPad (opset 18), AffineGrid (opset 20) and Col2Im (opset
18) imported into kiln and compared with ONNX Runtime, their shape inputs
(the window, the grid's size, the image and block shapes) given at call
time as ONNX Runtime takes them; kiln.nn.functional.affine_grid against
torch's, gradient included; models using them exported back and run in
ONNX Runtime; bad inputs refused naming the node."""
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import kiln
import kiln.nn.functional as F
from onnx_test_models import matches_onnx_runtime

FLOAT, DOUBLE, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64
BOOL = TensorProto.BOOL
rng = np.random.default_rng(2024)


def model_file(tmp_path, node, inputs, opset, out_type=FLOAT):
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y", out_type, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=9)
    path = tmp_path / f"{node.op_type}_{node.name}.onnx"
    onnx.save(model, str(path))
    return path


def info(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def ints(*values):
    return np.array(values, dtype=np.int64)


def floats(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def call(path, *feeds):
    return kiln.onnx.load(path)(*[kiln.from_numpy(np.array(f, copy=True)) for f in feeds])


# ---- CenterCropPad ----

def center_crop_pad(tmp_path, x_shape, shape_len, dtype=FLOAT, **attrs):
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="ccp", **attrs)
    return model_file(tmp_path, node, [info("x", dtype, x_shape), info("shape", I64, [shape_len])],
                      18, dtype)


def test_center_crop_pad_all_axes_odd_and_even(tmp_path):
    """Crops and pads by even and odd amounts, mixed across axes: the odd
    element goes to the end either way."""
    path = center_crop_pad(tmp_path, [5, 6, 4], 3)
    x = floats(5, 6, 4)
    model = matches_onnx_runtime(path, [(x, ints(2, 3, 4)), (x, ints(8, 9, 4)),
                                        (x, ints(4, 7, 1)), (x, ints(5, 6, 4)),
                                        (x, ints(3, 10, 7)), (x, ints(2, 3, 4))])
    assert model.value_inputs == ["shape"]


def test_center_crop_pad_axes_subset_and_negative_axes(tmp_path):
    x = floats(2, 7, 6)
    path = center_crop_pad(tmp_path, [2, 7, 6], 2, axes=[-1, 1])
    matches_onnx_runtime(path, [(x, ints(3, 4)), (x, ints(9, 10)), (x, ints(6, 7))])
    one = tmp_path / "one"
    one.mkdir()
    path = center_crop_pad(one, [2, 7, 6], 1, axes=[-2])
    matches_onnx_runtime(path, [(x, ints(2)), (x, ints(12))])


@pytest.mark.parametrize("dtype, np_dtype",
                         [(I64, np.int64), (BOOL, np.bool_), (DOUBLE, np.float64)])
def test_center_crop_pad_keeps_the_dtype(tmp_path, dtype, np_dtype):
    x = rng.integers(-9, 9, (4, 5)).astype(np_dtype)
    path = center_crop_pad(tmp_path, [4, 5], 2, dtype)
    matches_onnx_runtime(path, [(x, ints(3, 8)), (x, ints(7, 2))])


def test_center_crop_pad_of_an_input_with_symbolic_sizes(tmp_path):
    """Whether an axis is cropped or padded depends on its size: the model
    specializes on the input's shape too."""
    path = center_crop_pad(tmp_path, ["n", "h", "w"], 2, axes=[1, 2])
    matches_onnx_runtime(path, [(floats(2, 5, 6), ints(3, 8)), (floats(1, 9, 2), ints(3, 8)),
                                (floats(3, 4, 4), ints(4, 4))])


# ---- AffineGrid ----

def affine_grid_model(tmp_path, dims, align_corners, dtype=FLOAT):
    node = helper.make_node("AffineGrid", ["theta", "size"], ["y"], name="grid",
                            align_corners=align_corners)
    return model_file(tmp_path, node, [info("theta", dtype, ["n", dims, dims + 1]),
                                       info("size", I64, [dims + 2])], 20, dtype)


@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_2d(tmp_path, align_corners):
    path = affine_grid_model(tmp_path, 2, align_corners)
    theta, single = floats(3, 2, 3), floats(1, 2, 3)
    model = matches_onnx_runtime(path, [(theta, ints(3, 1, 4, 5)), (theta, ints(3, 2, 6, 3)),
                                        (single, ints(1, 3, 7, 7)), (theta, ints(3, 1, 1, 4)),
                                        (theta, ints(3, 1, 5, 1))], rtol=1e-5, atol=1e-6)
    assert model.value_inputs == ["size"]


@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_3d(tmp_path, align_corners):
    path = affine_grid_model(tmp_path, 3, align_corners)
    theta = floats(2, 3, 4)
    matches_onnx_runtime(path, [(theta, ints(2, 1, 3, 4, 5)), (theta, ints(2, 3, 2, 2, 6)),
                                (theta, ints(2, 1, 1, 3, 2))], rtol=1e-5, atol=1e-6)


def test_affine_grid_in_double(tmp_path):
    path = affine_grid_model(tmp_path, 2, 1, DOUBLE)
    matches_onnx_runtime(path, [(floats(2, 2, 3, dtype=np.float64), ints(2, 1, 3, 4))],
                         rtol=1e-12, atol=1e-12)


# ---- Col2Im ----

def col2im_model(tmp_path, dims, **attrs):
    node = helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"], name="c2i",
                            **attrs)
    return model_file(tmp_path, node, [info("x", FLOAT, [None, None, None]),
                                       info("image_shape", I64, [dims]),
                                       info("block_shape", I64, [dims])], 18)


def blocks(image, block, dilations, pads, strides):
    n = len(image)
    return int(np.prod([(image[d] + pads[d] + pads[d + n] - dilations[d] * (block[d] - 1) - 1)
                        // strides[d] + 1 for d in range(n)]))


def col2im_feeds(batch, channels, image, block, dilations=None, pads=None, strides=None):
    n = len(image)
    length = blocks(image, block, dilations or [1] * n, pads or [0] * 2 * n, strides or [1] * n)
    x = floats(batch, channels * int(np.prod(block)), length)
    return (x, ints(*image), ints(*block))


def test_col2im_2d_matches_onnx_runtime_and_torch_fold(tmp_path):
    path = col2im_model(tmp_path, 2)
    feeds = [col2im_feeds(2, 3, [5, 5], [2, 2]), col2im_feeds(1, 2, [4, 6], [3, 2]),
             col2im_feeds(3, 1, [6, 4], [1, 4])]
    model = matches_onnx_runtime(path, feeds, rtol=1e-5, atol=1e-5)
    assert sorted(model.value_inputs) == ["block_shape", "image_shape"]
    x, image, block = feeds[0]
    want = torch.nn.functional.fold(torch.from_numpy(x), tuple(image), tuple(block)).numpy()
    np.testing.assert_allclose(call(path, *feeds[0]).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 1]},
    {"pads": [1, 0, 1, 2]},
    {"dilations": [2, 2]},
    {"strides": [2, 3], "pads": [1, 2, 0, 1], "dilations": [1, 2]},
])
def test_col2im_2d_strides_pads_dilations(tmp_path, attrs):
    path = col2im_model(tmp_path, 2, **attrs)
    args = (attrs.get("dilations"), attrs.get("pads"), attrs.get("strides"))
    matches_onnx_runtime(path, [col2im_feeds(2, 2, [7, 6], [2, 3], *args),
                                col2im_feeds(1, 3, [5, 9], [3, 2], *args)], rtol=1e-5, atol=1e-5)


def test_col2im_1d_and_3d(tmp_path):
    path = col2im_model(tmp_path, 1, strides=[2], pads=[1, 2])
    matches_onnx_runtime(path, [col2im_feeds(2, 3, [9], [3], None, [1, 2], [2]),
                                col2im_feeds(1, 1, [6], [2], None, [1, 2], [2])],
                         rtol=1e-5, atol=1e-5)
    three = tmp_path / "three"
    three.mkdir()
    path = col2im_model(three, 3, strides=[1, 2, 1], pads=[0, 1, 1, 1, 0, 0])
    matches_onnx_runtime(path, [col2im_feeds(2, 2, [4, 5, 6], [2, 2, 2], None,
                                             [0, 1, 1, 1, 0, 0], [1, 2, 1])],
                         rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("image, block, attrs", [
    ([9], [3], {"dilations": [2], "strides": [2], "pads": [1, 2]}),
    ([5], [2], {"dilations": [2]}),
    ([4, 5, 6], [2, 2, 2], {"dilations": [1, 1, 2]}),
    ([5, 4, 6], [2, 2, 2],
     {"dilations": [2, 1, 1], "strides": [1, 1, 2], "pads": [1, 0, 0, 0, 1, 1]}),
])
def test_col2im_dilated_outside_2d_follows_the_reference(tmp_path, image, block, attrs):
    """ONNX Runtime's N-D Col2Im (not its 2-D one) misplaces dilated blocks
    (microsoft/onnxruntime#18156); kiln gives what ONNX's reference
    implementation gives, which is F.fold's sum in 2-D."""
    path = col2im_model(tmp_path, len(image), **attrs)
    feeds = col2im_feeds(2, 2, image, block, attrs.get("dilations"), attrs.get("pads"),
                         attrs.get("strides"))
    want = ReferenceEvaluator(str(path)).run(None, dict(zip(["x", "image_shape", "block_shape"],
                                                            feeds)))[0]
    np.testing.assert_allclose(call(path, *feeds).numpy(), want, rtol=1e-5, atol=1e-5)


# ---- shapes computed from symbolic input shapes ----

def test_sizes_from_the_shapes_of_symbolic_inputs(tmp_path):
    """AffineGrid(theta, Shape(x)), as a spatial transformer exported from
    torch writes it, and CenterCropPad to Shape(ref), their inputs of
    symbolic sizes: the model specializes on those inputs' shapes."""
    nodes = [helper.make_node("Shape", ["x"], ["size"]),
             helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=0),
             helper.make_node("Shape", ["ref"], ["window"]),
             helper.make_node("CenterCropPad", ["x", "window"], ["z"])]
    graph = helper.make_graph(nodes, "g", [info("x", FLOAT, ["n", 3, "h", "w"]),
                                           info("theta", FLOAT, ["n", 2, 3]),
                                           info("ref", FLOAT, ["a", "b", "c", "d"])],
                              [info("grid", FLOAT, None), info("z", FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    path = tmp_path / "shapes.onnx"
    onnx.save(model, str(path))
    matches_onnx_runtime(path, [(floats(2, 3, 5, 6), floats(2, 2, 3), floats(2, 3, 4, 8)),
                                (floats(1, 3, 7, 4), floats(1, 2, 3), floats(1, 2, 9, 3))],
                         rtol=1e-5, atol=1e-5)


# ---- export back ----

def test_imported_models_export_back_to_onnx_runtime(tmp_path):
    """A model specialized on its shape inputs is one kiln graph: exported,
    ONNX Runtime runs it to kiln's results."""
    cases = [
        (center_crop_pad(tmp_path, [5, 6], 2), (floats(5, 6), ints(3, 9))),
        (affine_grid_model(tmp_path, 2, 0), (floats(2, 2, 3), ints(2, 1, 4, 3))),
        (col2im_model(tmp_path, 2, strides=[2, 1], pads=[1, 0, 0, 1]),
         col2im_feeds(2, 2, [5, 4], [2, 2], None, [1, 0, 0, 1], [2, 1])),
    ]
    for path, feeds in cases:
        model = kiln.onnx.load(path)
        args = [kiln.from_numpy(np.array(f, copy=True)) for f in feeds]
        want = model(*args).numpy()
        single = model.specialize(*args)
        back = tmp_path / f"back_{path.stem}.onnx"
        kiln.onnx.export(single, (args[0],), back)
        session = ort.InferenceSession(str(back), providers=["CPUExecutionProvider"])
        got = session.run(None, {session.get_inputs()[0].name: feeds[0]})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---- bad input ----

def test_bad_inputs_are_refused_naming_the_node(tmp_path):
    path = col2im_model(tmp_path, 2)
    x, image, block = col2im_feeds(1, 2, [5, 5], [2, 2])
    with pytest.raises(ValueError, match=r"node 'c2i' \(Col2Im\).*L = 15 blocks.*give 16"):
        call(path, x[:, :, :15], image, block)
    with pytest.raises(ValueError, match=r"node 'c2i' \(Col2Im\).*divisible by the product"):
        call(path, x[:, :7, :], image, block)
    with pytest.raises(ValueError, match=r"node 'c2i' \(Col2Im\).*one length"):
        call(path, x, ints(5, 5, 1), block)
    with pytest.raises(RuntimeError, match=r"node 'c2i' \(Col2Im\).*sliding blocks"):
        call(path, x, ints(1, 5), block)
    node = helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"], name="rank4")
    rank4 = model_file(tmp_path, node, [info("x", FLOAT, [1, 8, 16, 1]),
                                        info("image_shape", I64, [2]),
                                        info("block_shape", I64, [2])], 18)
    with pytest.raises(ValueError, match=r"node 'rank4' \(Col2Im\).*input must be \[N, C \*"):
        call(rank4, x[..., None], image, block)

    grid = affine_grid_model(tmp_path, 2, 0)
    with pytest.raises(ValueError, match=r"guard.*AffineGrid 'grid'.*size\[0\] = 3"):
        call(grid, floats(2, 2, 3), ints(3, 1, 4, 4))
    node = helper.make_node("AffineGrid", ["theta", "size"], ["y"], name="fixed")
    fixed = model_file(tmp_path, node, [info("theta", FLOAT, [2, 2, 3]), info("size", I64, [4])],
                       20)
    with pytest.raises(ValueError, match=r"node 'fixed' \(AffineGrid\).*size\[0\] \(3\)"):
        call(fixed, floats(2, 2, 3), ints(3, 1, 4, 4))
    with pytest.raises(ValueError, match=r"node 'grid' \(AffineGrid\).*\(N, C, H, W\)"):
        call(grid, floats(2, 2, 3), ints(2, 1, 4))
    with pytest.raises(ValueError, match=r"node 'grid' \(AffineGrid\).*theta must be \[N, 3, 4\]"):
        call(grid, floats(2, 2, 3), ints(2, 1, 4, 4, 4))

    crop = center_crop_pad(tmp_path, [4, 5], 2, axes=[0])
    with pytest.raises(ValueError, match=r"node 'ccp' \(CenterCropPad\).*2 sizes for 1 axes"):
        call(crop, floats(4, 5), ints(2, 2))
    far = tmp_path / "far"
    far.mkdir()
    crop = center_crop_pad(far, [4, 5], 1, axes=[2])
    with pytest.raises(IndexError, match=r"node 'ccp' \(CenterCropPad\).*axis 2 is out of range"):
        call(crop, floats(4, 5), ints(2))


def test_sizes_past_int64_are_refused_not_a_crash(tmp_path):
    """Regression: image and block shapes whose products pass int64 wrapped
    the kernel's volume to 0, and `rows % 0` killed the process (SIGFPE),
    in Col2Im and in F.fold alike; ONNX Runtime refuses them."""
    path = col2im_model(tmp_path, 2)
    huge = ints(2**40, 2**40)
    with pytest.raises(RuntimeError, match=r"node 'c2i' \(Col2Im\).*too large"):
        call(path, floats(1, 1, 1), huge, huge)
    with pytest.raises(RuntimeError, match=r"node 'c2i' \(Col2Im\).*too large"):
        call(path, floats(1, 1, 0), ints(2**32, 2**32), ints(1, 1))
    with pytest.raises(RuntimeError, match=r"fold: .*too large"):
        F.fold(kiln.ones(1, 1, 1), (2**40, 2**40), (2**40, 2**40))
    with pytest.raises(RuntimeError, match=r"unfold: .*too large"):
        F.unfold(kiln.ones(1, 1, 4, 4), (2, 2), padding=2**62)


def test_shape_inputs_must_be_1d(tmp_path):
    """The window, size, image and block shapes are 1-D tensors (ONNX
    Runtime refuses others at load); kiln read a [1, 2] one as its values."""
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], name="ccp2d")
    path = model_file(tmp_path, node, [info("x", FLOAT, [2, 3]), info("shape", I64, [1, 2])], 18)
    with pytest.raises(ValueError, match=r"node 'ccp2d' \(CenterCropPad\).*1-D.*\[1, 2\]"):
        call(path, floats(2, 3), np.array([[4, 1]], np.int64))
    node = helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"], name="c2i2d")
    path = model_file(tmp_path, node, [info("x", FLOAT, [1, 2, 4]),
                                       info("image_shape", I64, [1, 2]),
                                       info("block_shape", I64, [2])], 18)
    with pytest.raises(ValueError, match=r"node 'c2i2d' \(Col2Im\).*1-D.*\[1, 2\]"):
        call(path, floats(1, 2, 4), np.array([[2, 2]], np.int64), ints(1, 1))


# ---- kiln.nn.functional.affine_grid against torch ----

@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 3, 4, 5), (2, 1, 1, 6)])
def test_affine_grid_matches_torch_with_gradient(size, align_corners):
    dims = len(size) - 2
    theta_np = floats(size[0], dims, dims + 1).astype(np.float64)
    weights = floats(*size[:1], *size[2:], dims).astype(np.float64)
    theta = kiln.from_numpy(theta_np.copy()).requires_grad_()
    want_theta = torch.from_numpy(theta_np.copy()).requires_grad_()
    with pytest.warns(UserWarning) if align_corners and 1 in size[2:] else _no_warning():
        got = F.affine_grid(theta, size, align_corners=align_corners)
    with warnings.catch_warnings():  # torch's own unit-size warning
        warnings.simplefilter("ignore")
        want = torch.nn.functional.affine_grid(want_theta, list(size),
                                               align_corners=align_corners)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-12)
    (got * kiln.from_numpy(weights)).sum().backward()
    (want * torch.from_numpy(weights)).sum().backward()
    np.testing.assert_allclose(theta.grad.numpy(), want_theta.grad.numpy(), rtol=1e-10, atol=1e-12)


class _no_warning:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_affine_grid_refuses_what_torch_refuses():
    for module in (kiln, torch):
        nnf = F if module is kiln else torch.nn.functional
        with pytest.raises(ValueError):
            nnf.affine_grid(module.ones(2, 2, 4), [2, 1, 3, 3], align_corners=False)
        with pytest.raises(ValueError):
            nnf.affine_grid(module.ones(2, 2, 3, dtype=module.int64), [2, 1, 3, 3],
                            align_corners=False)
        with pytest.raises(NotImplementedError):
            nnf.affine_grid(module.ones(2, 2, 3), [2, 1, 3], align_corners=False)
        with pytest.raises(RuntimeError):
            nnf.affine_grid(module.ones(2, 2, 3), [3, 1, 4, 4], align_corners=False)


def test_affine_grid_then_grid_sample_traces_and_exports(tmp_path):
    """The spatial-transformer pattern: affine_grid feeding grid_sample,
    exported and run in ONNX Runtime."""
    def transform(image, theta):
        grid = F.affine_grid(theta, [2, 3, 5, 6], align_corners=False)
        return F.grid_sample(image, grid, align_corners=False)

    image, theta = floats(2, 3, 7, 8), floats(2, 2, 3) * 0.5
    args = (kiln.from_numpy(image), kiln.from_numpy(theta))
    want = torch.nn.functional.grid_sample(
        torch.from_numpy(image),
        torch.nn.functional.affine_grid(torch.from_numpy(theta), [2, 3, 5, 6],
                                        align_corners=False), align_corners=False).numpy()
    np.testing.assert_allclose(transform(*args).numpy(), want, rtol=1e-5, atol=1e-5)
    traced = kiln.jit.trace(transform, args)
    path = tmp_path / "stn.onnx"
    kiln.onnx.export(traced, args, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    got = session.run(None, dict(zip(names, (image, theta))))[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- GridSample at opset 20 (renamed modes), after AffineGrid ----

@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_opset_20_modes(tmp_path, mode, align_corners):
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs", mode=mode,
                            padding_mode="border", align_corners=align_corners)
    path = model_file(tmp_path, node, [info("x", FLOAT, [2, 3, 5, 6]),
                                       info("grid", FLOAT, [2, 4, 7, 2])], 20)
    feeds = [[floats(2, 3, 5, 6), rng.uniform(-1.2, 1.2, (2, 4, 7, 2)).astype(np.float32)]
             for _ in range(2)]
    matches_onnx_runtime(path, feeds, rtol=1e-5, atol=1e-5)


def test_spatial_transformer_affine_grid_then_grid_sample(tmp_path):
    """The spatial transformer as exported at opset 20: AffineGrid's size
    from Shape(x), its grid into GridSample with opset 20's default mode."""
    nodes = [helper.make_node("Shape", ["x"], ["size"]),
             helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=0),
             helper.make_node("GridSample", ["x", "grid"], ["y"])]
    graph = helper.make_graph(nodes, "stn", [info("x", FLOAT, ["n", 3, 8, 9]),
                                             info("theta", FLOAT, ["n", 2, 3])],
                              [info("y", FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    path = tmp_path / "stn.onnx"
    onnx.save(model, str(path))
    feeds = [[floats(n, 3, 8, 9), (np.eye(2, 3) + 0.2 * floats(n, 2, 3)).astype(np.float32)]
             for n in (1, 3)]
    matches_onnx_runtime(path, feeds, rtol=1e-5, atol=1e-5)


def test_grid_sample_opset_20_refuses_volumes(tmp_path):
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs3d")
    path = model_file(tmp_path, node, [info("x", FLOAT, [1, 2, 3, 4, 5]),
                                       info("grid", FLOAT, [1, 2, 3, 4, 3])], 20)
    with pytest.raises(RuntimeError, match="GridSample 'gs3d': kiln samples 4-D inputs"):
        kiln.onnx.load(path)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_grid_sample_opset_20_refuses_the_old_mode_names(tmp_path, mode):
    """Opset 20 renamed bilinear and bicubic to linear and cubic; the old
    names are not opset 20's (ONNX Runtime refuses them too)."""
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs", mode=mode)
    path = model_file(tmp_path, node, [info("x", FLOAT, [1, 2, 3, 4]),
                                       info("grid", FLOAT, [1, 2, 3, 2])], 20)
    with pytest.raises(ValueError, match=f"GridSample 'gs': mode '{mode}' is not one of opset 20"):
        kiln.onnx.load(path)
