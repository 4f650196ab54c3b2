"""Alfred's Script Filter JSON, written once: the document, the message item, the encoding.

The daemon's result lists (``launcher.alfred``), the keystroke client's own messages
(``messages``: daemon down, warming up, errors) and the fallback of the zsh client
(``launcher/scripts/notewell-run.zsh``, pinned to ``feedback`` by tests/test_alfred_json.py)
all come out of ``feedback``. Imports nothing: the client's error paths write with it, and
``json`` alone costs about as much as the interpreter's start. ``dumps`` writes exactly the
bytes of ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))`` (a property test
holds it), so the daemon hands that C encoder in (``launcher.alfred``): about three times
faster on a list of results, with the same output.
"""

# json's own escapes with ensure_ascii=False: the quote, the backslash, control characters.
_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES.update({8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"})


def dumps(value: object) -> str:
    """``value`` (dicts with string keys, lists, strings, numbers, booleans, None) as JSON."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def _string(s: str) -> str:
    # Most strings need no escape: three scans in C instead of a translate.
    if s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    return '"' + s.translate(_ESCAPES) + '"'


def _write(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, dict):
        sep = "{"
        for key, item in value.items():
            out.append(sep + _string(key) + ":")
            _write(item, out)
            sep = ","
        out.append("{}" if sep == "{" else "}")
    elif isinstance(value, (list, tuple)):
        sep = "["
        for item in value:
            out.append(sep)
            _write(item, out)
            sep = ","
        out.append("[]" if sep == "[" else "]")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif value is None:
        out.append("null")
    elif isinstance(value, (int, float)):
        out.append(repr(value))
    else:
        raise TypeError(f"{type(value).__name__} is not written as Alfred JSON")


def message_item(title: str, subtitle: str = "", *, arg: str | None = None,
                 action: str | None = None, query: str | None = None) -> dict:
    """One item that says something: valid (Enter does ``action`` with ``arg``) only with
    an ``arg``; ``query`` rides along in its variables for the action (the "start the
    daemon" item shows Alfred again on it)."""
    item: dict = {"title": title, "subtitle": subtitle, "valid": arg is not None,
                  "icon": {"path": "icon.png"}}
    if arg is not None:
        item["arg"] = arg
    if action:
        item["variables"] = {"action": action} if query is None else {"action": action,
                                                                      "query": query}
    return item


def feedback(items: list[dict], *, rerun: float | None = None,
             variables: dict | None = None, dumps=dumps) -> str:
    """The Script Filter document: Alfred's own ordering and filtering off
    (``skipknowledge``), ``rerun`` seconds when it should ask again, ``variables`` for
    every item."""
    doc: dict = {"skipknowledge": True, "items": items}
    if rerun is not None:
        doc["rerun"] = rerun
    if variables:
        doc["variables"] = variables
    return dumps(doc)
