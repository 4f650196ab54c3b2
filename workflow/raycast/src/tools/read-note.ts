/**
 * Read one of the user's notes as Markdown, by the noteId find-notes returned: its text
 * (or only the section under a heading), title, tags, date and link. Long notes come in
 * pages: when nextPage is not null, call again with page set to it to read on.
 */
import { NoteAnswer, readNoteTool } from "../ai";
import { daemonSocket } from "../place";

export type Input = {
  /** The noteId of a note from find-notes, exactly as it was returned. */
  noteId: string;
  /** Where to read from: leave it out for the first page, or pass nextPage from the last answer. */
  page?: number;
  /** Only the section under this heading: its text, or a path like "Setup > Linux". */
  heading?: string;
};

export default async function tool(input: Input): Promise<NoteAnswer> {
  return readNoteTool(daemonSocket(), input);
}
