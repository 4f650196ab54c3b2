/**
 * Where the notewell daemon listens: the same rules as notewell/paths.py, so the extension
 * finds the socket the daemon binds (NOTEWELL_HOME override, per-platform data directory,
 * and the short /tmp fallback when the path would not fit in sun_path).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

const APP = "notewell";
const MAX_SOCKET_PATH = 103; // macOS sun_path is 104 bytes including the NUL

export interface Place {
  /** NOTEWELL_HOME, from the preference or the environment; empty means the default. */
  notewellHome?: string;
  env?: Record<string, string | undefined>;
  platform?: string;
  userHome?: string;
  uid?: number;
}

function expandUser(p: string, userHome: string): string {
  return p === "~" || p.startsWith("~/") ? userHome + p.slice(1) : p;
}

export function notewellHome(place: Place = {}): string {
  const env = place.env ?? process.env;
  const userHome = place.userHome ?? homedir();
  const explicit = place.notewellHome || env.NOTEWELL_HOME;
  if (explicit) return resolve(expandUser(explicit, userHome));
  if ((place.platform ?? process.platform) === "darwin") {
    return join(userHome, "Library", "Application Support", APP);
  }
  return join(env.XDG_DATA_HOME || join(userHome, ".local", "share"), APP);
}

export function socketPath(place: Place = {}): string {
  const env = place.env ?? process.env;
  const home = notewellHome(place);
  const explicit = Boolean(place.notewellHome || env.NOTEWELL_HOME);
  let candidate: string;
  if (explicit || (place.platform ?? process.platform) === "darwin") {
    candidate = join(home, "run");
  } else {
    candidate = env.XDG_RUNTIME_DIR ? join(env.XDG_RUNTIME_DIR, APP) : join(home, "run");
  }
  const sock = join(candidate, "notewell.sock");
  if (Buffer.byteLength(sock) <= MAX_SOCKET_PATH) return sock;
  const digest = createHash("sha256").update(home).digest("hex").slice(0, 12);
  const uid = place.uid ?? process.getuid?.() ?? 0;
  return join("/tmp", `${APP}-${uid}`, digest, "notewell.sock");
}

/**
 * The `notewell` command to start the daemon with: the *notewell command* preference when
 * set, else the command line the installed notewell records in its home each time it
 * serves, installs its agent or builds the Alfred workflow (`notewell-command`, a JSON
 * list: `["/…/bin/notewell"]`, or `[python, "-m", "notewell"]`). Empty if neither.
 */
export function notewellCommand(place: Place = {}, preference = ""): string[] {
  if (preference.trim()) return [preference.trim()];
  try {
    const recorded: unknown = JSON.parse(readFileSync(join(notewellHome(place), "notewell-command"), "utf8"));
    if (Array.isArray(recorded) && recorded.length > 0 && recorded.every((a) => typeof a === "string")) {
      return recorded as string[];
    }
  } catch {
    // no record yet (notewell never ran with this home) or an unreadable one
  }
  return [];
}
