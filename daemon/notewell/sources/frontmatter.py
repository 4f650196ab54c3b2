"""YAML frontmatter as notes write it: the subset real vaults use (scalars, quoted and
block values, lists inline and in lines), read without a YAML library (why:
docs/architecture.md, dependencies), and the fields notewell takes from it: ``title``,
``tags``/``tag``, ``aliases``/``alias`` and dates.

May import nothing of notewell.
"""

from __future__ import annotations

import datetime
import re

_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)


def split_frontmatter(text: str) -> tuple[dict, str]:
    m = _FRONTMATTER.match(text)
    if not m:
        return {}, text
    return parse_yaml_subset(m.group(1)), text[m.end():]


def parse_yaml_subset(block: str) -> dict:
    """Top-level ``key: value`` pairs, inline ``[a, b]`` lists, ``- item`` block lists,
    ``>``/``|`` block scalars and plain values continued on indented lines.

    Frontmatter in the wild is often not valid YAML; notewell reads only a few keys, and
    a line it cannot read is ignored rather than failing the note (a YAML library rejects
    the whole block: docs/architecture.md, "Dependencies")."""
    result: dict = {}
    key = None
    folded: list[str] | None = None  # the lines of the current key's multi-line value
    style = ""
    for line in block.splitlines():
        if folded is not None and (not line.strip() or line[:1] in " \t") and not (
                style == "plain" and re.match(r"^\s*-\s", line)):
            folded.append(line.strip())
            continue
        if folded is not None:
            result[key] = _join_block(folded, style)
            folded = None
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = re.match(r"^\s*-\s+(.*)$", line)
        if item and key is not None:
            current = result.get(key)
            if not isinstance(current, list):
                current = [] if current in (None, "") else [current]
            current.append(_scalar(item.group(1)))
            result[key] = current
            continue
        kv = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if not kv:
            continue
        key, value = kv.group(1).lower(), kv.group(2).strip()
        if value.startswith("[") and value.endswith("]"):
            result[key] = [_scalar(v) for v in _split_inline(value[1:-1]) if v.strip()]
        elif re.fullmatch(r"[>|][1-9+-]{0,2}", value):
            folded, style = [], value[0]
        else:
            result[key] = _scalar(value)
            if value and value[0] not in "\"'":
                folded, style = [result[key]], "plain"  # it may go on below
    if folded is not None:
        result[key] = _join_block(folded, style)
    return result


def _join_block(lines: list[str], style: str) -> str:
    """``|`` keeps the line breaks; ``>`` and plain values fold them into spaces."""
    if style == "|":
        return "\n".join(lines).strip("\n")
    return " ".join(x for x in lines if x)


def _split_inline(s: str) -> list[str]:
    parts, current, quote = [], [], None
    for ch in s:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            current.append(ch)
        elif ch == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


_DQ_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)")
_DQ_NAMED = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}


def _unescape(m: re.Match[str]) -> str:
    """One YAML double-quoted escape (``\\"``, ``\\n``, ``\\U0001F332``)."""
    code = m.group(1)
    if len(code) > 1:
        point = int(code[1:], 16)
        # A lone surrogate could not be stored or sent as UTF-8.
        return chr(point) if point < 0xD800 or 0xE000 <= point <= 0x10FFFF else "\ufffd"
    return _DQ_NAMED.get(code, code)


def _scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return _DQ_ESCAPE.sub(_unescape, value[1:-1])
    return _drop_comment(value)


_COMMENT_START = re.compile(r"\s#")


def _drop_comment(value: str) -> str:
    """A plain value without its `` # comment`` (as ``\\s+#.*$``, which is quadratic on a
    long run of spaces: the run before the first "#" after a space goes with it)."""
    m = _COMMENT_START.search(value)
    return value if m is None else value[:m.start() + 1].rstrip()


def meta_title(meta: dict) -> str | None:
    title = meta.get("title")
    return title.strip() if isinstance(title, str) and title.strip() else None


_META_DATE = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2}))?"
                        r"(?:\.\d+)?(Z|[+-]\d{2}:?\d{2})?)?$")


def meta_created(meta: dict) -> float | None:
    """When the note was created, from frontmatter ``created`` or ``date`` (``2025-03-01``,
    ``2025-03-01 14:30``, ``2025-03-01T14:30:00Z``; local time without an offset), else
    None: a file's own times say when it was copied, not written."""
    for key in ("created", "date"):
        value = meta.get(key)
        m = _META_DATE.match(value.strip()) if isinstance(value, str) else None
        if not m:
            continue
        year, month, day, hour, minute, second, zone = m.groups()
        try:
            tz = None
            if zone == "Z":
                tz = datetime.timezone.utc
            elif zone:
                sign = 1 if zone[0] == "+" else -1
                digits = zone[1:].replace(":", "")
                tz = datetime.timezone(sign * datetime.timedelta(
                    hours=int(digits[:2]), minutes=int(digits[2:])))
            when = datetime.datetime(int(year), int(month), int(day), int(hour or 0),
                                     int(minute or 0), int(second or 0), tzinfo=tz)
            return when.timestamp()
        except (ValueError, OverflowError):
            continue
    return None


def meta_list(meta: dict, *keys: str) -> list[str]:
    out: list[str] = []
    for key in keys:
        value = meta.get(key)
        if isinstance(value, str):
            value = [v for v in re.split(r"[,\s]+" if key.startswith("tag") else r",", value)]
        if isinstance(value, list):
            out.extend(str(v).strip().lstrip("#") for v in value if str(v).strip())
    return list(dict.fromkeys(out))
