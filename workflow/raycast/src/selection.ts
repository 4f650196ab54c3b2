/**
 * Which text "Related Notes to Selected Text" reads: the selection in the frontmost app,
 * else the clipboard's text; neither when both are empty or only whitespace.
 */
export interface Chosen {
  text: string;
  from: "selection" | "clipboard";
}

export function chooseText(selected?: string | null, clipboard?: string | null): Chosen | null {
  if (selected && selected.trim()) return { text: selected, from: "selection" };
  if (clipboard && clipboard.trim()) return { text: clipboard, from: "clipboard" };
  return null;
}
