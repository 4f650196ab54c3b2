"""The launcher icons, drawn in code: no downloaded art, byte-identical on every build.

Each icon is a few shapes described by signed distance functions (negative inside), so one
evaluation per pixel gives anti-aliased edges without supersampling. ``png`` writes an
RGBA image with ``zlib`` only. ``python -m notewell.launcher.icons DIR`` refreshes the
copies checked in under ``workflow/``.
"""

from __future__ import annotations

import math
import os
import struct
import sys
import zlib
from collections.abc import Callable
from functools import lru_cache

RGB = tuple[int, int, int]
# A layer: colour plus a distance function over unit coordinates (0..1, y down).
Layer = tuple[RGB, Callable[[float, float], float]]

KINDS = ("app", "bear", "obsidian", "markdown")


def png(width: int, height: int, rgba: bytes) -> bytes:
    """A PNG file for 8-bit RGBA rows (no filtering: the shapes compress well anyway)."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    stride = width * 4
    raw = b"".join(b"\x00" + rgba[y * stride:(y + 1) * stride] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


# -- distance functions (unit square coordinates) -------------------------------------------


def circle(cx: float, cy: float, r: float) -> Callable[[float, float], float]:
    return lambda x, y: math.hypot(x - cx, y - cy) - r


def rounded_box(cx: float, cy: float, hw: float, hh: float, r: float
                ) -> Callable[[float, float], float]:
    def d(x: float, y: float) -> float:
        qx, qy = abs(x - cx) - hw + r, abs(y - cy) - hh + r
        return math.hypot(max(qx, 0.0), max(qy, 0.0)) + min(max(qx, qy), 0.0) - r
    return d


def diamond(cx: float, cy: float, hw: float, hh: float) -> Callable[[float, float], float]:
    # An L1 ball scaled to the two half-widths; close enough to a true distance at the edge.
    k = hw * hh / math.hypot(hw, hh)
    return lambda x, y: (abs(x - cx) / hw + abs(y - cy) / hh - 1.0) * k


def ring(cx: float, cy: float, r: float, width: float) -> Callable[[float, float], float]:
    return lambda x, y: abs(math.hypot(x - cx, y - cy) - r) - width / 2


def union(*fs: Callable[[float, float], float]) -> Callable[[float, float], float]:
    return lambda x, y: min(f(x, y) for f in fs)


def minus(a: Callable[[float, float], float], b: Callable[[float, float], float]
          ) -> Callable[[float, float], float]:
    return lambda x, y: max(a(x, y), -b(x, y))


# -- the icons --------------------------------------------------------------------------------

WHITE: RGB = (255, 255, 255)


def layers(kind: str) -> list[Layer]:
    tile = rounded_box(0.5, 0.5, 0.46, 0.46, 0.12)
    if kind == "bear":  # Bear: a white bear head on Bear's red
        head = union(circle(0.5, 0.56, 0.25), circle(0.3, 0.33, 0.1), circle(0.7, 0.33, 0.1))
        face = union(circle(0.41, 0.52, 0.035), circle(0.59, 0.52, 0.035),
                     circle(0.5, 0.65, 0.06))
        return [((214, 64, 69), tile), (WHITE, minus(head, face))]
    if kind == "obsidian":  # Obsidian: a faceted crystal on violet
        stone = diamond(0.5, 0.5, 0.24, 0.36)
        facet = diamond(0.56, 0.54, 0.1, 0.2)
        return [((124, 58, 237), tile), (WHITE, stone), ((196, 170, 250), facet)]
    if kind == "markdown":  # a page with text lines, on slate
        page = rounded_box(0.5, 0.52, 0.25, 0.32, 0.03)
        lines = union(*(rounded_box(0.5, y, 0.15, 0.022, 0.02) for y in (0.4, 0.5, 0.6, 0.7)))
        return [((51, 65, 85), tile), (WHITE, page), ((59, 130, 246), lines)]
    if kind == "app":  # notewell: a well (ring) with a drop falling into it, on teal
        return [((13, 148, 136), tile), (WHITE, ring(0.5, 0.66, 0.19, 0.07)),
                (WHITE, union(circle(0.5, 0.33, 0.07), diamond(0.5, 0.25, 0.048, 0.1)))]
    raise ValueError(f"unknown icon {kind!r}; known: {', '.join(KINDS)}")


@lru_cache(maxsize=16)
def render(kind: str, size: int = 256) -> bytes:
    """The icon as PNG bytes, ``size`` pixels square."""
    out = bytearray(size * size * 4)
    shapes = layers(kind)
    px = 1.0 / size
    for j in range(size):
        y = (j + 0.5) * px
        for i in range(size):
            x = (i + 0.5) * px
            r = g = b = a = 0.0
            for colour, dist in shapes:
                cover = min(max(0.5 - dist(x, y) / px, 0.0), 1.0)
                if cover <= 0.0:
                    continue
                # "over" compositing in premultiplied terms
                r = colour[0] * cover + r * (1 - cover)
                g = colour[1] * cover + g * (1 - cover)
                b = colour[2] * cover + b * (1 - cover)
                a = cover + a * (1 - cover)
            k = (j * size + i) * 4
            if a > 0:
                out[k:k + 4] = bytes((round(r / a), round(g / a), round(b / a), round(a * 255)))
    return png(size, size, bytes(out))


def alfred_files(size: int = 256) -> dict[str, bytes]:
    """The icons the Alfred workflow ships, by their path inside the workflow."""
    return {"icon.png": render("app", size),
            **{f"icons/{k}.png": render(k, size) for k in ("bear", "obsidian", "markdown")}}


def write(directory: str, files: dict[str, bytes]) -> list[str]:
    written = []
    for rel, data in files.items():
        path = os.path.join(directory, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m notewell.launcher.icons REPO_DIR", file=sys.stderr)
        return 2
    repo = args[0]
    write(os.path.join(repo, "workflow", "alfred"), alfred_files())
    raycast = {"assets/icon.png": render("app", 512),
               **{f"assets/{k}.png": render(k, 128) for k in ("bear", "obsidian", "markdown")}}
    for path in write(os.path.join(repo, "workflow", "raycast"), raycast):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
