/**
 * What the extension says about the extras of a search reply (notices, tags being typed,
 * "New note", an index that lags or is being rebuilt), in the Alfred workflow's words:
 * notewell/launcher/alfred.py is the reference, and tests/test_raycast.py runs both on the
 * same replies. Pure functions, no Raycast import, so a plain Node script can run them.
 */
import type { Behind, NewNote, Rebuilding, TagCount } from "./daemon";

export interface Line {
  title: string;
  subtitle: string;
}

const FILTER_HELP = "Filters: #tag and in:source · remove them to search everything";
const DATE_FILTERS = ["after:", "before:", "since:", "created:"];
const DATE_FORMS = "Dates: after:2025-03-01 · before:2025-06 · since:7d (2w, 3m, 1y) · created:2025";
export const APP_NAMES: Record<string, string> = { bear: "Bear", obsidian: "Obsidian", markdown: "your editor" };

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** A notice above the results; one about a date filter shows the accepted forms. */
export function noticeLine(notice: string): Line {
  const dated = DATE_FILTERS.some((prefix) => notice.toLowerCase().startsWith(prefix));
  const cut = notice.indexOf("; use ");
  if (dated && cut >= 0) return { title: notice.slice(0, cut), subtitle: "Use " + notice.slice(cut + 6) };
  return { title: notice, subtitle: dated ? DATE_FORMS : FILTER_HELP };
}

/** A tag while "#wor" is typed; Enter searches it (Raycast's second action, ⌘↩, goes into
 * its nested tags where Alfred uses Tab). */
export function tagLine(tag: TagCount): Line {
  return {
    title: `#${tag.tag}`,
    subtitle:
      `${plural(tag.notes, "note")} · Enter searches #${tag.tag}` + (tag.nested ? " · ⌘↩ goes into its nested tags" : ""),
  };
}

/** "New note: TITLE", created by the source's own app through its URL scheme. */
export function newNoteLine(note: NewNote, found: boolean): Line {
  const app = APP_NAMES[note.kind] ?? note.kind;
  const tags = note.tags.map((t) => `#${t}`).join(" ");
  const where = `in ${app}` + (note.kind !== "bear" ? ` (${note.source})` : "");
  return {
    title: `New note: ${note.title}`,
    subtitle: `Create it ${where}` + (tags ? ` tagged ${tags}` : "") + (found ? "" : " · no notes match"),
  };
}

/** The index lags its sources: results may miss recent edits. */
export function behindLine(behind: Behind): Line {
  const minutes = Math.max(1, Math.trunc(behind.minutes ?? 0));
  const subtitle = behind.error
    ? `Syncing ${behind.error[0]} keeps failing: ${behind.error[1]}`
    : `Changes in ${(behind.sources ?? []).join(", ")} are not indexed yet; results may miss recent edits`;
  return { title: `Index is ${plural(minutes, "minute")} behind`, subtitle: subtitle.slice(0, 300) };
}

/** A damaged index is being rebuilt: results fill in as it grows. */
export function rebuildingLine(rebuilding: Rebuilding): Line {
  const notes = Math.trunc(rebuilding.notes ?? 0);
  return {
    title: "notewell is rebuilding its index…",
    subtitle: `The old one was damaged and kept aside; ${notes} notes indexed so far, results may be incomplete`,
  };
}
