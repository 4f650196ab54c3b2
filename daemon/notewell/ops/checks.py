"""The result of one ``notewell doctor`` check (``Check``), and the checks of the model:
the shipped files, which file runs, and a model folder named in ``[model]`` (with, for a
model ``notewell model use`` downloaded, its files against the sha256 recorded when they
arrived). Everything is imported when a check runs: ``doctor`` loads this at once."""

from __future__ import annotations

import os
from dataclasses import dataclass

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"  # a warning works, at a cost
REINSTALL = ("reinstall notewell: `pipx reinstall notewell`, `uv tool install --reinstall "
             "notewell` or `pip install --force-reinstall notewell`; in a checkout `make install`")


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | FAIL | skip
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4} {self.name}: {self.detail}"
        return text + (f" -> {self.fix}" if self.fix and self.status != OK else "")


def check_model() -> Check:
    name = "model files"
    try:
        from notewell.model.files import locate_model_files, verify_model_files

        files = locate_model_files()
        verify_model_files(files)
    except Exception as e:
        return Check(name, FAIL, str(e), REINSTALL)
    return Check(name, OK, f"{os.path.basename(files.model)} and tokenizer.json, sha256 match")


def check_model_rewrite() -> Check:
    """Which model file runs, the int8 rewrite (63 MB less memory, faster queries) or the
    shipped file, and why (``notewell.model.runtime``). May make the one-time choice."""
    name = "model in memory"
    try:
        from notewell.model.files import MODEL_SHA256, locate_model_files
        from notewell.model.runtime import recorded_choice, runtime_model

        files = locate_model_files()
        running = runtime_model(files.model, files.tokenizer, MODEL_SHA256)
        choice = recorded_choice(MODEL_SHA256) or {}
    except Exception as e:
        return Check(name, WARN, f"cannot tell: {e}", REINSTALL)
    cosine = (f", vectors at cosine {choice['min_cosine']} to the shipped file's"
              if "min_cosine" in choice else "")
    if running != files.model:
        return Check(name, OK, f"int8 weights kept int8: {running}{cosine}")
    why = choice.get("why", "no choice recorded")
    step = (f"{REINSTALL}, then `notewell agent restart`"
            if "onnx package" in why else "nothing to do: the shipped file works, with more "
            "memory; after an onnxruntime upgrade the choice is made again")
    return Check(name, WARN, f"the shipped file, float weights: {why}{cosine}", step)


def check_own_model(model) -> list[Check]:
    """``[model]``: the folder's files, the inputs and outputs the loader needs and one
    test embedding (its dimension), then which file runs and why."""
    name = "own model"
    try:
        from notewell.model.custom import open_folder
        from notewell.model.runtime import custom_embedder, recorded_choice

        folder = open_folder(model.path, **model.settings())
        loaded = custom_embedder(folder)  # loads it and embeds one text
    except Exception as e:
        return [Check(name, FAIL, str(e), "fix [model] in config.toml, or remove the table "
                      "to use the shipped model; the current index keeps serving meanwhile")]
    s = folder.settings
    prefixes = (f", prefixes {s.query_prefix!r} / {s.passage_prefix!r}"
                if s.query_prefix or s.passage_prefix else "")
    found = Check(name, OK, f"{folder.path}: inputs {', '.join(loaded.inputs)}, output "
                  f"{loaded.output}, a test embedding of {loaded.dim} dimensions; "
                  f"{s.pooling} pooling, {s.max_tokens} tokens{prefixes}")
    if loaded.files.model != folder.files.model:
        running = f"int8 weights kept int8: {loaded.files.model}"
    else:
        why = (recorded_choice(folder.model_sha256) or {}).get("why", "no choice recorded")
        if "no int8 weights" in why:
            why = "it has no int8 weights to keep int8 (a float export)"
        running = f"model.onnx as exported (the int8 rewrite does not apply: {why})"
    return [found, Check("own model in memory", OK, running), *check_downloaded(folder.path)]


def check_downloaded(folder: str) -> list[Check]:
    """A model ``notewell model use`` downloaded: where it came from and whether its files
    are still the bytes received (their sha256 against ``manifest.json``)."""
    from notewell.model import catalog

    manifest = catalog.read_manifest(folder)
    if not manifest.get("complete"):
        return []  # a folder of the user's own
    name = "downloaded model"
    where = f"{manifest.get('name')} from {manifest.get('repo')}@{manifest.get('revision')}"
    changed = catalog.changed_files(folder)
    if changed:
        return [Check(name, FAIL, f"{where}: {', '.join(changed)} changed since it was "
                      "downloaded", f"delete {folder} and run `notewell model use "
                      f"{manifest.get('name')}` again")]
    digests = ", ".join(f"{n} {f.get('sha256', '')[:16]}…"
                        for n, f in sorted(manifest.get("files", {}).items()))
    return [Check(name, OK, f"{where}; sha256 as received: {digests}")]
