"""The Alfred 5 workflow, generated: ``info.plist``, icons and the action bootstrap, zipped.

``build()`` writes a ``.alfredworkflow`` (a zip with everything at its root). No Python path
is baked into it: it carries its own copy of the zsh client, which hands over to the zsh
client of the running daemon's installation (``notewell-client`` in the notewell home, so
an upgrade of notewell changes nothing for it), else finds the daemon's socket and, when
it needs Python, this installation, through files in the home (``notewell-socket``,
``notewell-command``), so reinstalling notewell on another Python changes nothing for it
either. The object graph:

    Script Filter (keyword ``{var:keyword}``, default ``n``) ──↩──▶ Run Script: open
        ├─⌘─▶ Run Script: reveal       ├─⌥─▶ Run Script: copy passage
        ├─⌃─▶ Run Script: copy link    ├─⇧─▶ Run Script: quicklook
        └─fn─▶ Call External Trigger "search" ──▶ External Trigger "search" ──▶ Script Filter
    Universal Action "Related notes" (text, files) ─┐
    Hotkey (unset; the selection in macOS) ─────────┴▶ Script Filter "Related notes"
        (keyword ``{var:related_keyword}``, default ``nr``) ──▶ the same actions as above

The related notes Script Filter runs ``notewell alfred related`` of the recorded
installation (``launcher.alfred_related``) through the zsh client's ``--alfred-related``.
The search's Script Filter runs the per-keystroke client with the query as argv (never ``{query}``
substitution): the workflow's copy of the zsh client (``launcher/scripts/notewell-query.zsh``,
sourced by Alfred's own /bin/zsh: no Python start per keystroke; it hands anything but a
ready answer to ``notewell alfred query`` of the recorded installation). It terminates the
previous run on each keystroke and runs immediately, and leaves ordering to notewell
(Alfred's filtering off; the items carry ``skipknowledge``).
⌘L (large type), ⌘C (copy) and ⌘Y (Quick Look) are Alfred's own, fed by each item's
``text`` and ``quicklookurl``. The Run Script objects all run ``notewell alfred action`` of
the recorded installation through the same script (see ``alfred_actions``), which also
guards against the stale-Enter race.
"""

from __future__ import annotations

import io
import os
import plistlib
import shlex
import subprocess
import sys
import uuid
import zipfile
from dataclasses import dataclass

from notewell import __version__
from notewell.launcher import icons
from notewell.launcher.alfred_actions import BUNDLE_ID, SEARCH_TRIGGER
from notewell.wire import paths

DEFAULT_KEYWORD = "n"
DEFAULT_RELATED_KEYWORD = "nr"
RELATED_FLAG = "--alfred-related"  # the zsh client runs `notewell alfred related ...`
PYTHON_CLIENT = "notewell-query"

# NSEvent modifier flags, as Alfred stores them on a connection.
CMD, ALT, CTRL, SHIFT, FN = 1 << 20, 1 << 19, 1 << 18, 1 << 17, 1 << 23
MODIFIERS = {"cmd": CMD, "alt": ALT, "ctrl": CTRL, "shift": SHIFT, "fn": FN}

# Script object "type" in Alfred's plist: 5 runs the script with /bin/zsh (which reads only
# /etc/zshenv and ~/.zshenv when it is not interactive).
SCRIPT_ZSH = 5
ARGV = 1  # scriptargtype: the query arrives as $1, never substituted into the script text
QUEUE_TERMINATE_PREVIOUS = 2
QUEUE_DELAY_IMMEDIATE = 0
QUEUE_DELAY_AUTOMATIC = 1  # after the last character typed
HOTKEY_SELECTION = 1  # a Hotkey's argument: the selection in macOS (text, or files)
ARGUMENT_OPTIONAL = 1

# (object name, connection modifier, action passed to `notewell alfred action`, label)
ACTIONS = [
    ("open", 0, "open", "Open in its app"),
    ("reveal", CMD, "reveal", "Reveal in Finder (or open, for Bear)"),
    ("copy_passage", ALT, "copy", "Copy the passage"),
    ("copy_link", CTRL, "copy", "Copy a Markdown link"),
    ("quicklook", SHIFT, "quicklook", "Quick Look"),
]

# What a launcher runs, shipped inside the package (package data): the zsh client (the
# workflow carries a copy) and its Python fallback. Run through an interpreter (``source``,
# ``python -IS``), so an install that drops exec bits changes nothing.
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
ZSH_CLIENT = "notewell-query.zsh"
ZSH_RUN = "notewell-run.zsh"  # what the zsh client sources when it needs the installation
ACTION_FLAG = "--alfred-action"  # the zsh client runs `notewell alfred action ...`


def script_path(name: str) -> str:
    return os.path.join(SCRIPTS, name)


def script_bytes(name: str) -> bytes:
    with open(script_path(name), "rb") as f:
        return f.read()


README = """notewell: semantic search over your Bear, Obsidian and Markdown notes.

Type the keyword (default "n", change it in Configure Workflow) and a few words.

- Enter: open the note in its app
- ⌘: reveal the file in Finder (Bear notes: open in Bear)
- ⌥: copy the passage
- ⌃: copy a Markdown link [title](url)
- ⇧ or ⌘Y: Quick Look
- ⌘L: large type of the passage, ⌘C: copy it
- fn: notes similar to this one

An empty query lists recently modified notes. Filters: #tag, in:SOURCE.

Related notes: select text (or a Markdown, text or PDF file) in any app and run the
Universal Action "Related notes", or bind a key to this workflow's Hotkey (left unset)
and press it: the notes nearest in meaning to it. "nr TEXT" does the same for typed text.
If the daemon is not running, one item says so; Enter starts it.

This workflow was built by `notewell alfred build`. It holds no path to Python: it finds
notewell through its home (NOTEWELL_HOME, or ~/Library/Application Support/notewell):
the running daemon's own client in `notewell-client` and its socket in `notewell-socket`
(written by the daemon), the installation in `notewell-command` (written by `notewell
serve`, `agent install` and `alfred build`). Neither reinstalling notewell on another
Python nor upgrading notewell needs a new workflow.
"""


@dataclass(frozen=True)
class Installation:
    """This package's clients as the demo and ``doctor`` run them: the Python client and
    the zsh client (None only where it is missing); and the NOTEWELL_HOME the workflow
    passes on. The workflow holds only that home (Python paths change with every Python
    upgrade)."""

    client: str
    home: str | None = None  # NOTEWELL_HOME, passed through when set
    fast_client: str | None = None


def this_installation() -> Installation:
    """The clients shipped in this package, wherever it is (a checkout's ``daemon/`` or an
    install's ``site-packages``)."""
    fast = os.path.realpath(script_path(ZSH_CLIENT))
    return Installation(client=os.path.realpath(script_path(PYTHON_CLIENT)),
                        home=os.environ.get("NOTEWELL_HOME") or None,
                        fast_client=fast if os.path.exists(fast) else None)


def _uid(name: str) -> str:
    # Stable uids: rebuilding gives the same graph, so Alfred updates instead of duplicating.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"notewell/alfred/{name}")).upper()


def script_filter_command() -> tuple[int, str]:
    """(Alfred script type, script) of the Script Filter: the workflow's own zsh client
    (Alfred runs scripts in the workflow's folder)."""
    return SCRIPT_ZSH, f'source ./{ZSH_CLIENT} "$1"'


def related_command() -> str:
    """The related notes Script Filter's script: the selection (text, or a file's path)
    as $1, to ``notewell alfred related`` of the recorded installation."""
    return f'source ./{ZSH_CLIENT} {RELATED_FLAG} "$1"'


def action_command(action: str) -> str:
    return f'source ./{ZSH_CLIENT} {ACTION_FLAG} {shlex.quote(action)} "$1"'


def info_plist(home: str | None = None) -> dict:
    """The workflow's ``info.plist`` as a dict (``plistlib.dumps`` writes it); ``home``:
    the NOTEWELL_HOME it passes on, if any."""
    sf = _uid("scriptfilter")
    language, script = script_filter_command()
    objects = [_script_filter(sf, "{var:keyword}", "Search your notes",
                              "notewell · empty query: recently modified notes",
                              "Searching…", language, script, QUEUE_DELAY_IMMEDIATE)]
    connections: dict[str, list[dict]] = {sf: []}
    uidata: dict[str, dict] = {sf: {"xpos": 60, "ypos": 200}}
    for row, (name, modifier, action, label) in enumerate(ACTIONS):
        uid = _uid(f"action/{name}")
        objects.append(_object(uid, "action.script", 2, {
            "type": SCRIPT_ZSH, "script": action_command(action), "scriptfile": "",
            "scriptargtype": ARGV, "escaping": 0, "concurrently": False}))
        connections[sf].append(_wire(uid, modifier, "" if not modifier else label))
        uidata[uid] = {"xpos": 360, "ypos": 40 + 120 * row, "note": label}
    call, trigger = _uid("call/similar"), _uid("trigger/search")
    objects.append(_object(call, "output.callexternaltrigger", 1, {
        "externaltriggerid": SEARCH_TRIGGER, "passinputasargument": True,
        "passvariables": False, "workflowbundleid": "self"}))
    objects.append(_object(trigger, "trigger.external", 1, {
        "triggerid": SEARCH_TRIGGER, "availableviaurlhandler": False}))
    connections[sf].append(_wire(call, FN, "Show notes similar to this one"))
    connections[trigger] = [_wire(sf, 0, "")]
    uidata[call] = {"xpos": 360, "ypos": 40 + 120 * len(ACTIONS),
                    "note": "fn: re-run the search as similar:NOTE_ID"}
    uidata[trigger] = {"xpos": 60, "ypos": 420,
                       "note": "Shows the Script Filter with a query: fn (similar notes), "
                       "and the stale-Enter guard re-showing the newest query"}

    _related(objects, connections, uidata)
    variables = {"NOTEWELL_HOME": home} if home else {}
    return {
        "bundleid": BUNDLE_ID,
        "name": "notewell",
        "description": "Semantic search over your Bear, Obsidian and Markdown notes",
        "category": "Productivity",
        "createdby": "notewell",
        "webaddress": "",
        "version": __version__,
        "disabled": False,
        "readme": README,
        "objects": objects,
        "connections": connections,
        "uidata": uidata,
        "variables": variables,
        # Machine paths: never exported with the workflow.
        "variablesdontexport": sorted(variables),
        "userconfigurationconfig": [
            _keyword("keyword", "Keyword", "What you type before the query",
                     DEFAULT_KEYWORD),
            _keyword("related_keyword", "Related notes keyword",
                     "What you type before a text to list the notes related to it (the "
                     "Universal Action and the Hotkey open the same list)",
                     DEFAULT_RELATED_KEYWORD)],
    }


def _keyword(variable: str, label: str, description: str, default: str) -> dict:
    """A keyword the user may change in Configure Workflow."""
    return {"type": "textfield", "variable": variable, "label": label,
            "description": description, "config": {
                "default": default, "placeholder": default, "required": True, "trim": True}}


def _script_filter(uid: str, keyword: str, title: str, subtext: str, running: str,
                   language: int, script: str, delay: int) -> dict:
    """A Script Filter that runs ``script`` on each query (an empty one too) and shows its
    items as they come, unfiltered by Alfred."""
    return _object(uid, "input.scriptfilter", 3, {
        "keyword": keyword,
        "withspace": True,
        "argumenttype": ARGUMENT_OPTIONAL,
        "argumenttrimmode": 0,
        "argumenttreatemptyqueryasnil": False,
        "title": title,
        "subtext": subtext,
        "runningsubtext": running,
        "type": language,
        "script": script,
        "scriptfile": "",
        "scriptargtype": ARGV,
        "escaping": 0,  # nothing is substituted into the script, so nothing to escape
        "queuemode": QUEUE_TERMINATE_PREVIOUS,
        "queuedelaymode": delay,
        "queuedelaycustom": 1,
        "queuedelayimmediatelyinitially": True,
        "alfredfiltersresults": False,
        "alfredfiltersresultsmatchmode": 0,
    })


def _object(uid: str, kind: str, version: int, config: dict) -> dict:
    """One object of the graph: ``kind`` is its type after ``alfred.workflow.``."""
    return {"uid": uid, "type": f"alfred.workflow.{kind}", "version": version,
            "config": config}


def _related(objects: list[dict], connections: dict[str, list[dict]],
             uidata: dict[str, dict]) -> None:
    """Related notes: a Script Filter fed by a Universal Action (on selected text and on
    files) and by a Hotkey left unset for the user to bind (its argument: the selection
    in macOS), whose items act as the search's do (the same Run Scripts and modifiers)."""
    sf, search = _uid("scriptfilter/related"), _uid("scriptfilter")
    ua, hotkey = _uid("universalaction/related"), _uid("hotkey/related")
    # An empty selection gets an item saying so. The selection arrives whole and runs at
    # once; typed text waits for a pause (each run embeds the whole text).
    objects.append(_script_filter(
        sf, "{var:related_keyword}", "Related notes",
        "notewell · the notes nearest in meaning to a text or a file", "Reading…",
        SCRIPT_ZSH, related_command(), QUEUE_DELAY_AUTOMATIC))
    objects.append(_object(ua, "trigger.universalaction", 1, {
        "name": "Related notes", "acceptstext": True, "acceptsfiles": True,
        "acceptsurls": False, "acceptsmulti": 0}))
    # hotkey/hotmod 0: no key bound; the user picks one in Alfred's preferences.
    objects.append(_object(hotkey, "trigger.hotkey", 2, {
        "action": 0, "argument": HOTKEY_SELECTION, "focusedappvariable": False,
        "focusedappvariablename": "", "hotkey": 0, "hotmod": 0, "hotstring": "",
        "leftcursor": False, "modsmode": 0, "relatedAppsMode": 0}))
    connections[ua] = [_wire(sf, 0, "")]
    connections[hotkey] = [_wire(sf, 0, "")]
    connections[sf] = [dict(w) for w in connections[search]]  # the search's actions
    uidata[sf] = {"xpos": 60, "ypos": 700}
    uidata[ua] = {"xpos": -240, "ypos": 640, "note": "Related notes: on selected text, "
                  "or on a Markdown, text or PDF file"}
    uidata[hotkey] = {"xpos": -240, "ypos": 780, "note": "Bind a key here: the notes "
                      "related to the text (or file) selected in any app"}


def _wire(destination: str, modifiers: int, subtext: str) -> dict:
    return {"destinationuid": destination, "modifiers": modifiers,
            "modifiersubtext": subtext, "vitoclose": False}


def plist_bytes(home: str | None = None) -> bytes:
    return plistlib.dumps(info_plist(home), sort_keys=True)


def files(home: str | None = None) -> dict[str, tuple[bytes, int]]:
    """Every file of the workflow by its path in the zip, with its Unix mode."""
    return {"info.plist": (plist_bytes(home), 0o644), ZSH_CLIENT: (script_bytes(ZSH_CLIENT), 0o755),
            ZSH_RUN: (script_bytes(ZSH_RUN), 0o644),
            **{rel: (data, 0o644) for rel, data in icons.alfred_files().items()}}


def default_output() -> str:
    return os.path.join(paths.home(), "alfred", "notewell.alfredworkflow")


def build(out: str | None = None) -> str:
    """Write the ``.alfredworkflow`` (for this NOTEWELL_HOME) and return its path."""
    out = os.path.abspath(out or default_output())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, (data, mode) in sorted(files(this_installation().home).items()):
            info = zipfile.ZipInfo(rel, date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16  # a regular file with this mode
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    paths.write_atomic(out, buf.getvalue())
    return out


def install(path: str, platform: str | None = None) -> tuple[bool, str]:
    """Open the workflow in Alfred (macOS). Returns (done, what to tell the user)."""
    platform = platform or sys.platform
    if platform != "darwin":
        return False, (f"built {path}. Alfred runs on macOS only; build and install the "
                       "workflow on the Mac where notewell runs (`notewell alfred install`).")
    result = subprocess.run(["open", path], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return False, (f"`open {path}` failed: {result.stderr.strip()}; double-click the "
                       "file in Finder to import it into Alfred")
    return True, f"opened {path}: confirm the import in Alfred's window"


def main(argv: list[str] | None = None) -> int:
    """``python -m notewell.launcher.alfred_workflow REPO`` refreshes the checked-in
    ``workflow/alfred/info.plist``; the icons come from ``python -m notewell.launcher.icons
    REPO``, the zsh client is ``daemon/notewell/launcher/scripts/notewell-query.zsh``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m notewell.launcher.alfred_workflow REPO_DIR", file=sys.stderr)
        return 2
    target = os.path.join(args[0], "workflow", "alfred")
    with open(os.path.join(target, "info.plist"), "wb") as f:
        f.write(plist_bytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
