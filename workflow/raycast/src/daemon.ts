/**
 * Talking to the notewell daemon over its Unix socket: one length-prefixed msgpack frame
 * out, one back (the protocol in notewell/protocol.py). Measured faster per keystroke
 * than spawning the Python client, because Raycast keeps this process alive between
 * keystrokes (see workflow/raycast/README.md).
 */
import { decode, encode } from "@msgpack/msgpack";
import { execFile } from "node:child_process";
import { connect } from "node:net";

export const PROTOCOL_VERSION = 1;
const MAX_REPLY_BYTES = 16 * 1024 * 1024;

export interface Hit {
  note_id: string;
  title: string;
  source: string;
  kind: string; // "bear" | "obsidian" | "markdown"
  url: string;
  path: string | null;
  tags: string[];
  heading_path: string;
  snippet: string;
  passage: string;
  score: number;
  modified: number | null;
  archived: boolean;
  attachment?: string | null; // the file the passage came from (a PDF, an image Bear read)
  spans?: number[][]; // the query's words in `passage`: [start, end) in code points
  snippet_spans?: number[][];
  passages?: Passage[]; // the note's best passages, best first (the shown one first)
}

/** One of a note's passages that matched, with the query's words in it. */
export interface Passage {
  text: string;
  heading_path: string;
  spans: number[][];
  score: number;
}

/** Creating a note from the query in a source's own app (its URL scheme does the writing). */
export interface NewNote {
  source: string;
  kind: string;
  title: string;
  tags: string[];
  url: string;
}

export interface Results {
  hits: Hit[];
  notices: string[];
  new_note?: NewNote[]; // always last in the list; absent for similar notes
  tags?: TagCount[]; // instead of hits while the query is one tag being typed ("#wor")
  behind?: Behind; // the index lags its sources
  rebuilding?: Rebuilding; // a damaged index is being rebuilt: ask again shortly
}

/** How far the index lags its sources, and the sync error that keeps it behind. */
export interface Behind {
  minutes: number;
  sources: string[];
  error: [string, string] | null;
}

export interface Rebuilding {
  notes: number;
}

/** A tag and how many notes carry it; `nested`: tags sit under it (`work/apollo`). */
export interface TagCount {
  tag: string;
  notes: number;
  nested: boolean;
}

/** The daemon is not listening (no socket, or nobody behind it). */
export class DaemonDown extends Error {}

/** The daemon answered with an error, e.g. "warming_up". */
export class DaemonError extends Error {
  constructor(
    public readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function ask(socket: string, request: Record<string, unknown>, timeoutMs = 2000): Promise<unknown> {
  return new Promise((resolvePromise, reject) => {
    const body = encode({ v: PROTOCOL_VERSION, ...request });
    const frame = Buffer.alloc(4 + body.length);
    frame.writeUInt32BE(body.length, 0);
    Buffer.from(body.buffer, body.byteOffset, body.byteLength).copy(frame, 4);
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const conn = connect(socket);
    const finish = (error: Error | null, value?: unknown) => {
      if (settled) return;
      settled = true;
      conn.destroy();
      if (error) reject(error);
      else resolvePromise(value);
    };
    conn.setTimeout(timeoutMs, () => finish(new DaemonError("timeout", "notewell did not answer in time")));
    conn.on("connect", () => conn.write(frame));
    conn.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "ENOENT" || e.code === "ECONNREFUSED") finish(new DaemonDown(`nothing listens on ${socket}`));
      else finish(e);
    });
    conn.on("data", (data: Buffer) => {
      chunks.push(data);
      received += data.length;
      if (received < 4) return;
      const all = Buffer.concat(chunks);
      const size = all.readUInt32BE(0);
      if (size > MAX_REPLY_BYTES) return finish(new DaemonError("bad_frame", `reply of ${size} bytes`));
      if (all.length < 4 + size) return;
      try {
        finish(null, unwrap(decode(all.subarray(4, 4 + size))));
      } catch (e) {
        finish(e as Error);
      }
    });
    conn.on("end", () => finish(new DaemonError("closed", "the daemon closed the connection")));
  });
}

function unwrap(reply: unknown): unknown {
  const r = reply as { ok?: boolean; result?: unknown; error?: { code?: string; message?: string } };
  if (r && r.ok) return r.result;
  throw new DaemonError(r?.error?.code ?? "unknown", r?.error?.message ?? "unknown error");
}

export async function search(socket: string, query: string, limit = 30): Promise<Results> {
  return results(await ask(socket, { op: "search", query, limit, format: "json" }));
}

/** A search reply as the view reads it: everything the daemon sent, lists never missing. */
export function results(reply: unknown): Results {
  const r = (reply ?? {}) as Partial<Results>;
  const out: Results = { hits: r.hits ?? [], notices: r.notices ?? [], new_note: r.new_note ?? [] };
  if (r.tags) out.tags = r.tags;
  if (r.behind) out.behind = r.behind;
  if (r.rebuilding) out.rebuilding = r.rebuilding;
  return out;
}

export async function similar(socket: string, noteId: string, limit = 30): Promise<Results> {
  const result = (await ask(socket, { op: "similar", note_id: noteId, limit })) as Results;
  return { hits: result.hits ?? [], notices: result.notices ?? [] };
}

/** The most text `related` reads (MAX_RELATED_CHARS in notewell/wire/requests.py). */
export const MAX_RELATED_CHARS = 10_000;

/**
 * The notes nearest in meaning to any text (op `related`): a longer text is cut to
 * MAX_RELATED_CHARS and the daemon's answer says so (`truncated`). Embedding a long
 * text takes seconds, not a keystroke's milliseconds: hence the longer wait.
 */
export async function related(socket: string, text: string, limit = 30): Promise<Results> {
  const chars = Array.from(text); // code points, as the daemon counts them
  const result = (await ask(
    socket,
    {
      op: "related",
      text: chars.slice(0, MAX_RELATED_CHARS).join(""),
      truncated: chars.length > MAX_RELATED_CHARS,
      limit,
    },
    30000,
  )) as Results;
  return { hits: result.hits ?? [], notices: result.notices ?? [] };
}

/** A search's filters, as the daemon's `search` and `recent` ops take them. */
export interface Filters {
  tags?: string[];
  source?: string;
  modified_after?: string;
  modified_before?: string;
}

/** A search for an agent (Raycast AI): the same op and filters as notewell's MCP tool. */
export async function searchFiltered(
  socket: string,
  query: string,
  limit: number,
  filters: Filters,
): Promise<Results & { behind?: Behind }> {
  return results(await ask(socket, { op: "search", query, limit, format: "json", ...filters }, 10000));
}

/** One page of a note's text (op `note`), as notewell's MCP tool `get_note` reads it. */
export interface NotePage {
  note_id: string;
  title: string;
  source: string;
  url: string;
  path: string | null;
  tags: string[];
  modified: number | null;
  heading: string | null;
  text: string;
  offset: number;
  total_chars: number;
  next_offset: number | null;
  headings: string[];
}

export async function readNote(
  socket: string,
  noteId: string,
  options: { heading?: string; offset?: number; maxChars?: number } = {},
): Promise<NotePage> {
  const request: Record<string, unknown> = { op: "note", note_id: noteId };
  if (options.heading) request.heading = options.heading;
  if (options.offset !== undefined) request.offset = options.offset;
  if (options.maxChars !== undefined) request.max_chars = options.maxChars;
  return (await ask(socket, request, 10000)) as NotePage;
}

/** `notewell agent start`: through the agent when installed, else a detached daemon. */
export function startDaemon(command: string[], notewellHomeDir: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const env = { ...process.env, ...(notewellHomeDir ? { NOTEWELL_HOME: notewellHomeDir } : {}) };
    const [program, ...prefix] = command;
    execFile(program, [...prefix, "agent", "start"], { env, timeout: 20000 }, (error, stdout, stderr) => {
      if (error) reject(new Error((stderr || error.message).trim()));
      else resolvePromise(stdout.trim());
    });
  });
}

export function markdownLink(hit: Hit): string {
  return `[${hit.title.replace(/[[\]]/g, "")}](${hit.url})`;
}
