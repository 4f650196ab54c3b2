/**
 * Why a note matched, for the detail pane: a passage as Markdown with the query's words in
 * bold (the daemon's `spans`: [start, end) offsets in code points), the note's own text
 * escaped so it shows as written, and the note's next best passages under it.
 */
import type { Hit, Passage } from "./daemon";

// Every ASCII punctuation mark may be backslash-escaped in CommonMark; these are the ones
// that could start or end Markdown syntax inside a note's text.
const SPECIAL = /[\\`*_{}[\]()#+\-.!|<>~=&]/g;

export function escapeMarkdown(text: string): string {
  return text.replace(SPECIAL, (c) => `\\${c}`);
}

/** `text` as Markdown, the spans in bold, each line kept as a line. */
export function markedPassage(text: string, spans: number[][] = []): string {
  const chars = Array.from(text); // Python's offsets count code points, not UTF-16 units
  const out: string[] = [];
  let at = 0;
  for (const [start, end] of spans) {
    if (start < at || end > chars.length || start >= end) continue;
    out.push(escapeMarkdown(chars.slice(at, start).join("")));
    out.push(`**${escapeMarkdown(chars.slice(start, end).join(""))}**`);
    at = end;
  }
  out.push(escapeMarkdown(chars.slice(at).join("")));
  return out.join("").replace(/\n/g, "  \n");
}

/** The detail pane: the title, the shown passage marked, then up to two more of the note's. */
export function detailMarkdown(hit: Hit): string {
  const shown: Passage[] = hit.passages?.length
    ? hit.passages
    : [{ text: hit.passage, heading_path: hit.heading_path, spans: hit.spans ?? [], score: hit.score }];
  const parts = [`## ${escapeMarkdown(hit.title)}`, markedPassage(shown[0].text, shown[0].spans)];
  for (const p of shown.slice(1, 3)) {
    parts.push("---", `_${escapeMarkdown(p.heading_path || "Also in this note")}_`, markedPassage(p.text, p.spans));
  }
  return parts.join("\n\n");
}
