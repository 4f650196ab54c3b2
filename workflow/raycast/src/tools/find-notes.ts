/**
 * Search the user's own notes (Bear, Obsidian, Markdown folders, PDFs) by meaning and by
 * keywords, as their notewell launcher does. Returns one entry per note with the passage
 * that matched best (its section and a snippet); read a note in full with read-note and
 * its noteId. Use it for any question about what the user wrote, decided, planned or
 * noted ("what did I decide about the roof?"): search with the topic's words, not the
 * whole question, and try other words if nothing fits.
 */
import { SearchAnswer, searchNotes } from "../ai";
import { daemonSocket } from "../place";

export type Input = {
  /** What to look for, in a few words (the topic, names, terms the note may use). */
  query: string;
  /** Only notes carrying all of these tags (without '#'; a nested tag includes its children). */
  tags?: string[];
  /** Only notes of this source: a name from the user's notewell configuration. */
  source?: string;
  /**
   * Only notes modified on or after this date: 2025-03-01, 2025-06 (a month), 2025 (a
   * year), today, yesterday, or a time ago: 7d, 2w, 3m, 1y.
   */
  modifiedAfter?: string;
  /** Only notes modified before this date (the date named excluded), same forms. */
  modifiedBefore?: string;
  /** How many notes, 1 to 20 (default 8). */
  limit?: number;
};

export default async function tool(input: Input): Promise<SearchAnswer> {
  return searchNotes(daemonSocket(), input);
}
