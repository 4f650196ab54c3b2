"""Alfred messages the keystroke client renders by itself: daemon down, warming up, errors.

One item as Alfred's Script Filter JSON, written without importing ``json`` (it alone costs
the client more than its whole interpreter start). Result lists are rendered in the daemon
(``launcher.alfred``); this is the client's only Alfred output. Imports nothing.
"""

from __future__ import annotations


def message_feedback(title: str, subtitle: str = "", *, arg: str | None = None,
                     action: str | None = None, rerun: float | None = None,
                     query: str | None = None) -> str:
    """One message item as Alfred JSON, without importing ``json`` (the client's error
    paths). ``query`` rides along in the item's variables for its action (the "start the
    daemon" item shows Alfred again on it)."""
    parts = [f'"title":{_q(title)}', f'"subtitle":{_q(subtitle)}',
             f'"valid":{"true" if arg is not None else "false"}',
             '"icon":{"path":"icon.png"}']
    if arg is not None:
        parts.append(f'"arg":{_q(arg)}')
    if action:
        extra = f',"query":{_q(query)}' if query is not None else ""
        parts.append(f'"variables":{{"action":{_q(action)}{extra}}}')
    head = '{"skipknowledge":true,'
    if rerun is not None:
        head += f'"rerun":{rerun},'
    return head + '"items":[{' + ",".join(parts) + "}]}"


def _q(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
