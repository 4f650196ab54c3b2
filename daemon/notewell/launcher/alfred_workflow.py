"""The Alfred 5 workflow, generated: ``info.plist``, icons and the action bootstrap, zipped.

``build()`` writes a ``.alfredworkflow`` (a zip with everything at its root) with this
installation's interpreter and client filled in. The object graph:

    Script Filter (keyword ``{var:keyword}``, default ``n``) ──↩──▶ Run Script: open
        ├─⌘─▶ Run Script: reveal       ├─⌥─▶ Run Script: copy passage
        ├─⌃─▶ Run Script: copy link    ├─⇧─▶ Run Script: quicklook
        └─fn─▶ Call External Trigger "search" ──▶ External Trigger "search" ──▶ Script Filter

The Script Filter runs the per-keystroke client with the query as argv (never ``{query}``
substitution): the zsh client (``launcher/scripts/notewell-query.zsh``, shipped inside the
package, so a checkout and an installed notewell alike; sourced by Alfred's own /bin/zsh: no
Python start per keystroke; it hands anything but a ready answer to the Python client
beside it). It terminates the previous run on each
keystroke and runs immediately, and leaves ordering to notewell (Alfred's filtering off;
the items carry ``skipknowledge``).
⌘L (large type), ⌘C (copy) and ⌘Y (Quick Look) are Alfred's own, fed by each item's
``text`` and ``quicklookurl``. The Run Script objects all run ``notewell-action`` (see
``alfred_actions``), which also guards against the stale-Enter race.
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
ACTION_SCRIPT = "notewell-action"
PYTHON_CLIENT = "notewell-query"

# NSEvent modifier flags, as Alfred stores them on a connection.
CMD, ALT, CTRL, SHIFT, FN = 1 << 20, 1 << 19, 1 << 18, 1 << 17, 1 << 23
MODIFIERS = {"cmd": CMD, "alt": ALT, "ctrl": CTRL, "shift": SHIFT, "fn": FN}

# Script object "type" values in Alfred's plist: 0 runs the script with /bin/bash, 5 with
# /bin/zsh (which reads only /etc/zshenv and ~/.zshenv when it is not interactive).
SCRIPT_BASH = 0
SCRIPT_ZSH = 5
ARGV = 1  # scriptargtype: the query arrives as $1, never substituted into the script text
QUEUE_TERMINATE_PREVIOUS = 2
QUEUE_DELAY_IMMEDIATE = 0
ARGUMENT_OPTIONAL = 1

# (object name, connection modifier, action passed to notewell-action, label)
ACTIONS = [
    ("open", 0, "open", "Open in its app"),
    ("reveal", CMD, "reveal", "Reveal in Finder (or open, for Bear)"),
    ("copy_passage", ALT, "copy", "Copy the passage"),
    ("copy_link", CTRL, "copy", "Copy a Markdown link"),
    ("quicklook", SHIFT, "quicklook", "Quick Look"),
]

# What a launcher runs, shipped inside the package (package data): the zsh client, its
# Python fallback and the action bootstrap the workflow carries. Run through an interpreter
# (``source``, ``python -IS``), so an install that drops exec bits changes nothing.
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
ZSH_CLIENT = "notewell-query.zsh"


def script_path(name: str) -> str:
    return os.path.join(SCRIPTS, name)


def action_bootstrap() -> str:
    with open(script_path(ACTION_SCRIPT), encoding="utf-8") as f:
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
If the daemon is not running, one item says so; Enter starts it.

This workflow was built by `notewell alfred build` for one installation: the variables
NOTEWELL_PYTHON (the interpreter behind the Python client and the actions) and
NOTEWELL_PYTHONPATH point at it. Rebuild it after moving notewell or installing it
somewhere else; an upgrade in place needs nothing.
"""


@dataclass(frozen=True)
class Installation:
    """The absolute paths the workflow runs: the interpreter, the Python client, where the
    package lives, and the zsh client (None only where it is missing)."""

    python: str
    client: str
    pythonpath: str
    home: str | None = None  # NOTEWELL_HOME, passed through when set
    fast_client: str | None = None


def this_installation() -> Installation:
    """The interpreter running now and the clients shipped in this package, wherever it is
    (a checkout's ``daemon/`` or an install's ``site-packages``)."""
    package_parent = os.path.dirname(os.path.dirname(SCRIPTS))
    package_parent = os.path.dirname(package_parent)
    fast = os.path.realpath(script_path(ZSH_CLIENT))
    return Installation(python=os.path.abspath(sys.executable),
                        client=os.path.realpath(script_path(PYTHON_CLIENT)),
                        pythonpath=package_parent,
                        home=os.environ.get("NOTEWELL_HOME") or None,
                        fast_client=fast if os.path.exists(fast) else None)


PLACEHOLDER_SCRIPTS = "/path/to/notewell/daemon/notewell/launcher/scripts"
PLACEHOLDER = Installation(python="/path/to/notewell/.venv/bin/python",
                           client=f"{PLACEHOLDER_SCRIPTS}/{PYTHON_CLIENT}",
                           pythonpath="/path/to/notewell/daemon",
                           fast_client=f"{PLACEHOLDER_SCRIPTS}/{ZSH_CLIENT}")


def _uid(name: str) -> str:
    # Stable uids: rebuilding gives the same graph, so Alfred updates instead of duplicating.
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"notewell/alfred/{name}")).upper()


def script_filter_command(inst: Installation) -> tuple[int, str]:
    """(Alfred script type, script) of the Script Filter. The zsh client finds its Python
    fallback through the NOTEWELL_PYTHON workflow variable and beside itself."""
    if inst.fast_client:
        return SCRIPT_ZSH, f'source {shlex.quote(inst.fast_client)} "$1"'
    return SCRIPT_BASH, f'exec {shlex.quote(inst.python)} -IS {shlex.quote(inst.client)} "$1"'


def action_command(inst: Installation, action: str) -> str:
    return f'exec {shlex.quote(inst.python)} -IS ./{ACTION_SCRIPT} {action} "$1"'


def info_plist(inst: Installation) -> dict:
    """The workflow's ``info.plist`` as a dict (``plistlib.dumps`` writes it)."""
    sf = _uid("scriptfilter")
    language, script = script_filter_command(inst)
    objects: list[dict] = [{
        "uid": sf,
        "type": "alfred.workflow.input.scriptfilter",
        "version": 3,
        "config": {
            "keyword": "{var:keyword}",
            "withspace": True,
            "argumenttype": ARGUMENT_OPTIONAL,
            "argumenttrimmode": 0,
            "argumenttreatemptyqueryasnil": False,
            "title": "Search your notes",
            "subtext": "notewell · empty query: recently modified notes",
            "runningsubtext": "Searching…",
            "type": language,
            "script": script,
            "scriptfile": "",
            "scriptargtype": ARGV,
            "escaping": 0,  # nothing is substituted into the script, so nothing to escape
            "queuemode": QUEUE_TERMINATE_PREVIOUS,
            "queuedelaymode": QUEUE_DELAY_IMMEDIATE,
            "queuedelaycustom": 1,
            "queuedelayimmediatelyinitially": True,
            "alfredfiltersresults": False,
            "alfredfiltersresultsmatchmode": 0,
        },
    }]
    connections: dict[str, list[dict]] = {sf: []}
    uidata: dict[str, dict] = {sf: {"xpos": 60, "ypos": 200}}
    for row, (name, modifier, action, label) in enumerate(ACTIONS):
        uid = _uid(f"action/{name}")
        objects.append({
            "uid": uid,
            "type": "alfred.workflow.action.script",
            "version": 2,
            "config": {
                "type": SCRIPT_BASH,
                "script": action_command(inst, action),
                "scriptfile": "",
                "scriptargtype": ARGV,
                "escaping": 0,
                "concurrently": False,
            },
        })
        connections[sf].append(_wire(uid, modifier, "" if not modifier else label))
        uidata[uid] = {"xpos": 360, "ypos": 40 + 120 * row, "note": label}
    call = _uid("call/similar")
    trigger = _uid("trigger/search")
    objects.append({
        "uid": call,
        "type": "alfred.workflow.output.callexternaltrigger",
        "version": 1,
        "config": {"externaltriggerid": SEARCH_TRIGGER, "passinputasargument": True,
                   "passvariables": False, "workflowbundleid": "self"},
    })
    objects.append({
        "uid": trigger,
        "type": "alfred.workflow.trigger.external",
        "version": 1,
        "config": {"triggerid": SEARCH_TRIGGER, "availableviaurlhandler": False},
    })
    connections[sf].append(_wire(call, FN, "Show notes similar to this one"))
    connections[trigger] = [_wire(sf, 0, "")]
    uidata[call] = {"xpos": 360, "ypos": 40 + 120 * len(ACTIONS),
                    "note": "fn: re-run the search as similar:NOTE_ID"}
    uidata[trigger] = {"xpos": 60, "ypos": 420,
                       "note": "Shows the Script Filter with a query: fn (similar notes), "
                       "and the stale-Enter guard re-showing the newest query"}

    variables = {"NOTEWELL_PYTHONPATH": inst.pythonpath, "NOTEWELL_PYTHON": inst.python}
    if inst.home:
        variables["NOTEWELL_HOME"] = inst.home
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
        "userconfigurationconfig": [{
            "type": "textfield",
            "variable": "keyword",
            "label": "Keyword",
            "description": "What you type before the query",
            "config": {"default": DEFAULT_KEYWORD, "placeholder": DEFAULT_KEYWORD,
                       "required": True, "trim": True},
        }],
    }


def _wire(destination: str, modifiers: int, subtext: str) -> dict:
    return {"destinationuid": destination, "modifiers": modifiers,
            "modifiersubtext": subtext, "vitoclose": False}


def plist_bytes(inst: Installation) -> bytes:
    return plistlib.dumps(info_plist(inst), sort_keys=True)


def files(inst: Installation) -> dict[str, tuple[bytes, int]]:
    """Every file of the workflow by its path in the zip, with its Unix mode."""
    out = {"info.plist": (plist_bytes(inst), 0o644),
           ACTION_SCRIPT: (action_bootstrap().encode(), 0o755)}
    for rel, data in icons.alfred_files().items():
        out[rel] = (data, 0o644)
    return out


def default_output() -> str:
    return os.path.join(paths.home(), "alfred", "notewell.alfredworkflow")


def build(out: str | None = None, inst: Installation | None = None) -> str:
    """Write the ``.alfredworkflow`` and return its path."""
    out = os.path.abspath(out or default_output())
    inst = inst or this_installation()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, (data, mode) in sorted(files(inst).items()):
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
    ``workflow/alfred/info.plist`` (placeholder paths) and ``notewell-action``; the icons
    come from ``python -m notewell.launcher.icons REPO``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m notewell.launcher.alfred_workflow REPO_DIR", file=sys.stderr)
        return 2
    target = os.path.join(args[0], "workflow", "alfred")
    with open(os.path.join(target, "info.plist"), "wb") as f:
        f.write(plist_bytes(PLACEHOLDER))
    with open(os.path.join(target, ACTION_SCRIPT), "w") as f:
        f.write(action_bootstrap())
    os.chmod(os.path.join(target, ACTION_SCRIPT), 0o755)
    return 0


if __name__ == "__main__":
    sys.exit(main())
