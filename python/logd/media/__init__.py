"""Histogram, Image and Text: the values log() takes beside numbers.

    run.log({"loss": l, "grad/w1": logd.Histogram(p.grad), "sample": logd.Image(img, caption="step 50")}, step=s)

Each checks itself when made (a bad one raises in the caller's line, and nothing else of the row is kept), and
becomes one Media entry of the writer's next batch (proto: Media). The bounds are the daemon's (src/media.ts):
images at most 16 MiB encoded and 32768 pixels a side, histograms 1..4096 bins, text at most 1 MiB.

A tensor is binned where it lives (torch.histc on its device); only the bins come back, never the values. A NumPy
array is binned by numpy.histogram. NaN and infinities are left out of the bins and counted (`nonfinite`)."""
import io
import math
import struct
import zlib
from array import array

MAX_IMAGE_BYTES = 16 * 1024 * 1024
MAX_IMAGE_SIDE = 32768
MAX_HISTOGRAM_BINS = 4096
MAX_TEXT_BYTES = 1024 * 1024
MAX_CAPTION_BYTES = 4096
MEDIA_BATCH_BYTES = 8 * 1024 * 1024

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Media:
    """What every logged non-number is (Histogram, Image, Text)."""
    __slots__ = ()
    size = 64

    def to_pb(self, pb, key: str, step: int, t: float):
        raise NotImplementedError


def _le(a: array) -> bytes:
    if array("d").itemsize != 8:
        raise RuntimeError("logd: float64 arrays are needed")
    import sys
    if sys.byteorder != "little":
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def check_histogram(counts, edges) -> None:
    bins = len(counts)
    if bins < 1 or bins > MAX_HISTOGRAM_BINS:
        raise ValueError("logd: a histogram has 1..%d bins, not %d" % (MAX_HISTOGRAM_BINS, bins))
    if len(edges) != bins + 1:
        raise ValueError("logd: %d bins need %d edges, not %d" % (bins, bins + 1, len(edges)))
    prev = None
    for i, e in enumerate(edges):
        if not math.isfinite(e):
            raise ValueError("logd: histogram edge %d is %r; edges must be finite" % (i, e))
        if prev is not None and not e > prev:
            raise ValueError("logd: histogram edges must increase: edge %d (%r) is not above edge %d (%r)" % (i, e, i - 1, prev))
        prev = e
    for i, c in enumerate(counts):
        if not math.isfinite(c) or c < 0:
            raise ValueError("logd: histogram count %d is %r; counts must be finite and >= 0" % (i, c))


class Histogram(Media):
    """A distribution: counts in bins between edges.

    Histogram(values, bins=64, range=None): values a list, a NumPy array or a torch tensor (binned on its own
    device with torch.histc). Histogram(counts=..., edges=...): bins computed elsewhere (e.g. numpy.histogram's
    output: Histogram(np_histogram=np.histogram(a)))."""
    __slots__ = ("counts", "edges", "nonfinite")

    def __init__(self, values=None, bins: int = 64, range=None, *, counts=None, edges=None, np_histogram=None):
        if np_histogram is not None:
            counts, edges = np_histogram
        if counts is not None or edges is not None:
            if values is not None:
                raise TypeError("logd: Histogram takes values, or counts and edges, not both")
            if counts is None or edges is None:
                raise TypeError("logd: Histogram(counts=..., edges=...) needs both")
            c = [float(x) for x in _tolist(counts)]
            e = [float(x) for x in _tolist(edges)]
            check_histogram(c, e)
            self.counts, self.edges, self.nonfinite = array("d", c), array("d", e), 0
            return
        if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= MAX_HISTOGRAM_BINS:
            raise ValueError("logd: Histogram bins must be an integer 1..%d, not %r" % (MAX_HISTOGRAM_BINS, bins))
        if values is None:
            raise TypeError("logd: Histogram takes values (a list, a NumPy array or a torch tensor), or counts and edges")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
            if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
                raise ValueError("logd: Histogram range must be two finite numbers, low < high, not %r" % (range,))
        mod = type(values).__module__ or ""
        if mod.startswith("torch") and hasattr(values, "detach"):
            c, lo, hi, nonfinite = _torch_bins(values, bins, range)
        elif mod.startswith("numpy") and hasattr(values, "dtype"):
            c, lo, hi, nonfinite = _numpy_bins(values, bins, range)
        elif isinstance(values, (list, tuple, array)) or hasattr(values, "__iter__") and not isinstance(values, (str, bytes, dict)):
            c, lo, hi, nonfinite = _list_bins(values, bins, range)
        else:
            raise TypeError("logd: Histogram takes a list, a NumPy array or a torch tensor of numbers, not %s" % type(values).__name__)
        self.counts = array("d", c)
        self.edges = array("d", [lo + (hi - lo) * i / bins for i in _range(bins)] + [hi])
        self.nonfinite = int(nonfinite)

    size = property(lambda self: 16 * len(self.counts) + 72)

    def to_pb(self, pb, key, step, t):
        return pb.Media(key=key, step=step, time=t, kind="histogram", counts=_le(self.counts), edges=_le(self.edges),
                        nonfinite=self.nonfinite)

    def __repr__(self):
        return "logd.Histogram(%d bins in [%g, %g], %d values)" % (len(self.counts), self.edges[0], self.edges[-1], sum(self.counts))


_range = range


def _tolist(x):
    tolist = getattr(x, "tolist", None)
    return tolist() if callable(tolist) else list(x)


def _span(lo, hi, range):
    if range is not None:
        return float(range[0]), float(range[1])
    if lo is None:
        return 0.0, 1.0  # no finite value: empty bins, every value counted as nonfinite
    if lo == hi:
        return lo - 0.5, hi + 0.5
    return lo, hi


def _list_bins(values, bins, range):
    finite = []
    nonfinite = 0
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            try:
                v = float(v)
            except (TypeError, ValueError):
                raise TypeError("logd: Histogram values must be numbers; value %d is a %s" % (i, type(v).__name__)) from None
        if math.isfinite(v):
            finite.append(v)
        else:
            nonfinite += 1
    lo, hi = _span(min(finite) if finite else None, max(finite) if finite else None, range)
    counts = [0.0] * bins
    scale = bins / (hi - lo)
    for v in finite:
        b = int(math.floor((v - lo) * scale))
        counts[0 if b < 0 else bins - 1 if b >= bins else b] += 1
    return counts, lo, hi, nonfinite


def _numpy_bins(a, bins, range):
    import numpy as np
    a = np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise TypeError("logd: Histogram of a NumPy array of %s; it takes numbers" % a.dtype)
    a = a.ravel()
    if a.dtype.kind == "f":
        ok = np.isfinite(a)
        nonfinite = int(a.size - np.count_nonzero(ok))
        if nonfinite:
            a = a[ok]
    else:
        nonfinite = 0
    lo, hi = _span(float(a.min()) if a.size else None, float(a.max()) if a.size else None, range)
    if range is not None:
        a = np.clip(a, lo, hi)
    counts, _ = np.histogram(a, bins=bins, range=(lo, hi))
    return counts.tolist(), lo, hi, nonfinite


_CHUNK = 1 << 20


def _torch_bins(t, bins, range):
    """Bins a tensor where it is, in chunks of 1 M values (whole-tensor temporaries would cost its size again).
    Only the bins and two numbers come back from the device. On a GPU, torch.histc; on the CPU, bin indices and
    bincount (torch 1.13's CPU histc is several times slower). NaN and infinities are counted apart."""
    import torch
    t = t.detach()
    if t.is_complex() or t.dtype == torch.bool:
        raise TypeError("logd: Histogram of a %s tensor; it takes real numbers" % t.dtype)
    t = t.reshape(-1)

    # One pass over each chunk: its finite mask, count, min and max (kept, with the chunk's own float32 view, for
    # the binning pass when the range is known only at the end). Without a range the chunks are kept: a tensor
    # up to _CHUNK values is one chunk, larger ones cost one chunk of temporaries at a time.
    def chunk(c):
        if not c.is_floating_point() or c.dtype in (torch.float16, torch.bfloat16):
            c = c.float()
        ok = (c - c) == 0  # finite: x - x is NaN for NaN and for an infinity
        return c, ok, (None if c.is_cuda else int(ok.count_nonzero()))

    parts = t.split(_CHUNK)
    nonfinite = 0
    if range is None:
        lo = hi = None
        for c in parts:
            if not c.numel():
                continue
            c, ok, n = chunk(c)
            if n == c.numel():
                a, b = torch.aminmax(c)
            else:
                a = torch.where(ok, c, c.new_tensor(math.inf)).min()
                b = torch.where(ok, c, c.new_tensor(-math.inf)).max()
            lo = a if lo is None else torch.minimum(lo, a)
            hi = b if hi is None else torch.maximum(hi, b)
        mm = torch.stack([lo, hi]).tolist() if lo is not None else [math.inf, -math.inf]
        lo, hi = _span(mm[0], mm[1], None) if mm[0] <= mm[1] else _span(None, None, None)
    else:
        lo, hi = _span(None, None, range)
    counts = None
    scale = bins / (hi - lo)
    for c in parts:
        if not c.numel():
            continue
        c, ok, n = chunk(c)
        if c.is_cuda:
            nonfinite += c.numel() - int(ok.count_nonzero())
            part = torch.histc(c[ok].clamp(lo, hi), bins=bins, min=lo, max=hi)
        else:
            x = (c - lo).mul_(scale).clamp_(0, bins - 1)
            if n != c.numel():
                nonfinite += c.numel() - n
                x.masked_fill_(ok.logical_not_(), bins)  # an extra bin, dropped
            part = torch.bincount(x.to(torch.int32), minlength=bins + 1)[:bins]
        counts = part if counts is None else counts + part
    out = [float(x) for x in counts.tolist()] if counts is not None else [0.0] * bins
    return out, lo, hi, nonfinite


def sniff_image(b: bytes):
    """(format, width, height) that an image's own bytes say, or ValueError saying why they are no PNG or JPEG."""
    n = len(b)
    if n > MAX_IMAGE_BYTES:
        raise ValueError("logd: the image is %d bytes, more than the %d (16 MiB) an image may be; scale it down" % (n, MAX_IMAGE_BYTES))
    if b[:8] == _PNG_SIGNATURE:
        at = 8
        first = True
        w = h = 0
        while True:
            if at + 12 > n:
                raise ValueError("logd: the PNG is cut short (no IEND chunk at its end)")
            length = struct.unpack_from(">I", b, at)[0]
            kind = b[at + 4:at + 8]
            if not kind.isalpha():
                raise ValueError("logd: the PNG has a damaged chunk at byte %d" % at)
            if first:
                if kind != b"IHDR" or length != 13:
                    raise ValueError("logd: the PNG does not start with its IHDR chunk")
                w, h = struct.unpack_from(">II", b, at + 8)
                _check_sides("PNG", w, h)
                first = False
            if at + 12 + length > n:
                raise ValueError("logd: the PNG is cut short (its %s chunk at byte %d runs past the end)" % (kind.decode(), at))
            at += 12 + length
            if kind == b"IEND":
                return "png", w, h
    if n >= 4 and b[0] == 0xFF and b[1] == 0xD8 and b[2] == 0xFF:
        at = 2
        while at + 4 <= n:
            if b[at] != 0xFF:
                raise ValueError("logd: the JPEG has no marker where one belongs (byte %d)" % at)
            m = b[at + 1]
            if m == 0xFF:
                at += 1
                continue
            length = (b[at + 2] << 8) + b[at + 3]
            if length < 2:
                raise ValueError("logd: the JPEG has a damaged segment at byte %d" % at)
            if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
                if at + 9 > n:
                    break
                h, w = struct.unpack_from(">HH", b, at + 5)
                _check_sides("JPEG", w, h)
                if b[-2:] != b"\xff\xd9":
                    raise ValueError("logd: the JPEG is cut short (no end-of-image marker at its end)")
                return "jpeg", w, h
            if m in (0xD9, 0xDA):
                break
            at += 2 + length
        raise ValueError("logd: the JPEG has no frame header (its size) before its image data")
    raise ValueError("logd: the bytes are neither PNG nor JPEG (their first bytes are no PNG signature and no JPEG start marker)")


def _check_sides(fmt, w, h):
    if not (1 <= w <= MAX_IMAGE_SIDE and 1 <= h <= MAX_IMAGE_SIDE):
        raise ValueError("logd: the %s says it is %dx%d; each side must be 1..%d" % (fmt, w, h, MAX_IMAGE_SIDE))


def encode_png(pixels: bytes, width: int, height: int, channels: int) -> bytes:
    """PNG bytes of 8-bit pixels, row by row (channels 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA), with zlib."""
    color = {1: 0, 2: 4, 3: 2, 4: 6}.get(channels)
    if color is None:
        raise ValueError("logd: an image has 1, 2, 3 or 4 channels, not %d" % channels)
    row = width * channels
    raw = bytearray()
    mv = memoryview(pixels)
    for y in _range(height):
        raw.append(0)
        raw += mv[y * row:(y + 1) * row]

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (_PNG_SIGNATURE + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(raw), 6)) + chunk(b"IEND", b""))


def _caption(caption) -> str:
    if caption is None:
        return ""
    if not isinstance(caption, str):
        raise TypeError("logd: an image caption is a string, not %s" % type(caption).__name__)
    if len(caption.encode("utf-8", "surrogatepass")) > MAX_CAPTION_BYTES:
        raise ValueError("logd: an image caption is at most %d bytes" % MAX_CAPTION_BYTES)
    return caption


class Image(Media):
    """An image, with an optional caption. From PNG or JPEG bytes (kept as they are), an HWC uint8 array (NumPy;
    H x W, or H x W x 1..4 channels), a CHW tensor (torch; floats are taken as 0..1 and scaled to 0..255), or a PIL
    image. At most 16 MiB encoded and 32768 pixels a side."""
    __slots__ = ("data", "format", "width", "height", "caption")

    def __init__(self, data, caption=None):
        self.caption = _caption(caption)
        if isinstance(data, (bytes, bytearray, memoryview)):
            b = bytes(data)
        else:
            mod = type(data).__module__ or ""
            if mod.startswith("PIL"):
                b = _from_pil(data)
            elif mod.startswith("torch") and hasattr(data, "detach"):
                b = _from_tensor(data)
            elif mod.startswith("numpy") and hasattr(data, "dtype"):
                b = _from_hwc(data)
            else:
                raise TypeError("logd: Image takes PNG or JPEG bytes, an HWC uint8 NumPy array, a CHW torch tensor or a "
                                "PIL image, not %s" % type(data).__name__)
        self.format, self.width, self.height = sniff_image(b)
        self.data = b

    size = property(lambda self: len(self.data) + 64)

    def to_pb(self, pb, key, step, t):
        return pb.Media(key=key, step=step, time=t, kind="image", data=self.data, format=self.format, width=self.width,
                        height=self.height, caption=self.caption)

    def __repr__(self):
        return "logd.Image(%dx%d %s, %d bytes)" % (self.width, self.height, self.format, len(self.data))


def _from_pil(img) -> bytes:
    buf = io.BytesIO()
    if img.mode not in ("L", "LA", "RGB", "RGBA"):
        img = img.convert("RGBA" if "A" in img.mode else "RGB")
    img.save(buf, format="PNG")
    return buf.getvalue()


def _from_hwc(a) -> bytes:
    import numpy as np
    a = np.asarray(a)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or not 1 <= a.shape[2] <= 4:
        raise ValueError("logd: an image array is H x W or H x W x C (C 1..4), not of shape %s" % (a.shape,))
    if a.dtype.kind == "f":
        if not np.isfinite(a).all():
            raise ValueError("logd: an image array holds NaN or infinity")
        a = (np.clip(a, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    elif a.dtype != np.uint8:
        if a.dtype.kind not in "biu":
            raise TypeError("logd: an image array of %s; it takes uint8 (or floats in 0..1)" % a.dtype)
        a = np.clip(a, 0, 255).astype(np.uint8)
    h, w, c = a.shape
    if not (1 <= w <= MAX_IMAGE_SIDE and 1 <= h <= MAX_IMAGE_SIDE):
        raise ValueError("logd: an image is 1..%d pixels a side, not %dx%d" % (MAX_IMAGE_SIDE, w, h))
    return encode_png(np.ascontiguousarray(a).tobytes(), w, h, c)


def _from_tensor(t) -> bytes:
    t = t.detach().cpu()
    if t.dim() == 2:
        t = t.unsqueeze(0)
    if t.dim() != 3 or not 1 <= t.shape[0] <= 4:
        raise ValueError("logd: an image tensor is C x H x W (C 1..4) or H x W, not of shape %s" % (tuple(t.shape),))
    return _from_hwc(t.permute(1, 2, 0).numpy() if t.dtype.is_floating_point else t.permute(1, 2, 0).contiguous().numpy())


class Text(Media):
    """Text (UTF-8, at most 1 MiB): a generation, a prompt, a note. Shown as text, never as HTML."""
    __slots__ = ("text",)

    def __init__(self, text):
        if not isinstance(text, str):
            raise TypeError("logd: Text takes a str, not %s" % type(text).__name__)
        try:
            n = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError("logd: the text is not valid UTF-8 (a lone surrogate)") from None
        if n > MAX_TEXT_BYTES:
            raise ValueError("logd: a Text is at most %d bytes (1 MiB) of UTF-8, not %d" % (MAX_TEXT_BYTES, n))
        self.text = text

    size = property(lambda self: 3 * len(self.text) + 64)

    def to_pb(self, pb, key, step, t):
        return pb.Media(key=key, step=step, time=t, kind="text", text=self.text)

    def __repr__(self):
        return "logd.Text(%r)" % (self.text[:40],)
