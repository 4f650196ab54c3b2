/**
 * What the extension's AI tools (src/tools/) answer, apart from Raycast: each asks the
 * daemon through the extension's own client (daemon.ts) with the same ops and filters as
 * notewell's MCP tools (`search` in JSON, `note`), and shapes the answer for a model's
 * context: a hit is its note id, title, where in the note, a short snippet, tags and date.
 * Kept free of @raycast/api so a Node test runs it against a real daemon (scripts/).
 */
import { DaemonDown, DaemonError, Filters, Hit, readNote, searchFiltered } from "./daemon";
// The tools' inputs are declared once, where Raycast reads them (and their comments) for
// the model: type-only imports, gone from the compiled code.
import type { Input as ReadInput } from "./tools/read-note";
import type { Input as SearchInput } from "./tools/find-notes";

export const SNIPPET_CHARS = 240; // as notewell's MCP answers (agents/tools.py)
const WARM_UP_WAIT_MS = 15000;

export interface FoundNote {
  noteId: string;
  title: string;
  source: string;
  /** The headings above the passage that matched, outermost first. */
  section: string;
  snippet: string;
  tags: string[];
  /** The day the note was last modified (YYYY-MM-DD, local time), if known. */
  modified: string | null;
  url: string;
}

export interface SearchAnswer {
  notes: FoundNote[];
  /** Why a filter matched nothing, or a date that could not be read. */
  notices: string[];
  /** Set when the index lags its sources: recent edits may be missing. */
  behind?: string;
}

export interface NoteAnswer {
  noteId: string;
  title: string;
  source: string;
  tags: string[];
  modified: string | null;
  url: string;
  section: string | null;
  text: string;
  /** Pass as `page` to read on; null on the last page. */
  nextPage: number | null;
  totalChars: number;
  headings: string[];
}

function day(seconds: number | null | undefined): string | null {
  if (seconds === null || seconds === undefined) return null;
  const d = new Date(seconds * 1000);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

function snippet(text: string): string {
  const flat = (text ?? "").split(/\s+/).filter(Boolean).join(" ");
  return flat.length > SNIPPET_CHARS ? flat.slice(0, SNIPPET_CHARS - 1).trimEnd() + "…" : flat;
}

export function foundNote(hit: Hit): FoundNote {
  return {
    noteId: hit.note_id,
    title: hit.title,
    source: hit.source,
    section: hit.heading_path ?? "",
    snippet: snippet(hit.snippet),
    tags: hit.tags ?? [],
    modified: day(hit.modified),
    url: hit.url,
  };
}

/** A daemon that is down or failing, as words the model can relay (and act on). */
function explained(e: unknown): Error {
  if (e instanceof DaemonDown) {
    return new Error(
      "notewell's daemon is not running, so the notes cannot be read now. Tell the user to " +
        "start it: `notewell agent start` in a terminal, or open notewell's Search Notes command.",
    );
  }
  if (e instanceof DaemonError) return new Error(`notewell: ${e.message}`);
  return e instanceof Error ? e : new Error(String(e));
}

/** ``call``, retried while the daemon is still loading its model and index. */
async function answered<T>(call: () => Promise<T>, sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))): Promise<T> {
  const deadline = Date.now() + WARM_UP_WAIT_MS;
  for (;;) {
    try {
      return await call();
    } catch (e) {
      if (e instanceof DaemonError && e.code === "warming_up" && Date.now() < deadline) {
        await sleep(300);
        continue;
      }
      throw explained(e);
    }
  }
}

export async function searchNotes(socket: string, input: SearchInput): Promise<SearchAnswer> {
  const query = (input.query ?? "").trim();
  if (!query) throw new Error("query: say what to look for, in words");
  const filters: Filters = {};
  if (input.tags?.length) filters.tags = input.tags;
  if (input.source) filters.source = input.source;
  if (input.modifiedAfter) filters.modified_after = input.modifiedAfter;
  if (input.modifiedBefore) filters.modified_before = input.modifiedBefore;
  const limit = Math.min(Math.max(Math.round(input.limit ?? 8), 1), 20);
  const r = await answered(() => searchFiltered(socket, query, limit, filters));
  const out: SearchAnswer = { notes: r.hits.map(foundNote), notices: r.notices };
  if (r.behind) {
    out.behind = `the index is ${r.behind.minutes} min behind ${r.behind.sources.join(", ")}`;
  }
  return out;
}

export async function readNoteTool(socket: string, input: ReadInput): Promise<NoteAnswer> {
  const noteId = (input.noteId ?? "").trim();
  if (!noteId) throw new Error("noteId: give the noteId of a note found with find-notes");
  const page = await answered(() =>
    readNote(socket, noteId, { heading: input.heading, offset: input.page ?? 0 }),
  );
  return {
    noteId: page.note_id,
    title: page.title,
    source: page.source,
    tags: page.tags,
    modified: day(page.modified),
    url: page.url,
    section: page.heading,
    text: page.text,
    nextPage: page.next_offset,
    totalChars: page.total_chars,
    headings: page.headings,
  };
}
