/**
 * Related Notes to Selected Text: the notes nearest in meaning to the text selected in the
 * frontmost app (or, when nothing is selected, to the clipboard's text), listed with the
 * same items and actions as Search Notes. The daemon reads up to 10,000 characters of it,
 * all of them (notewell's op `related`), and says when it cut a longer text.
 */
import { Clipboard, Icon, List, getSelectedText } from "@raycast/api";
import { useEffect, useState } from "react";
import { DaemonError, Results, related } from "./daemon";
import { Items, usePlace, useResults } from "./search-notes";
import { Chosen, chooseText } from "./selection";

const NOTHING: Results = { hits: [], notices: [] };

async function readSelection(): Promise<Chosen | null> {
  let selected: string | undefined;
  try {
    selected = await getSelectedText(); // throws when the frontmost app has no selection
  } catch {
    selected = undefined;
  }
  let copied: string | undefined;
  try {
    copied = await Clipboard.readText();
  } catch {
    copied = undefined;
  }
  return chooseText(selected, copied);
}

export default function RelatedNotes() {
  const { socket } = usePlace();
  const [chosen, setChosen] = useState<Chosen | null | undefined>(undefined); // undefined: reading
  useEffect(() => {
    readSelection().then(setChosen);
  }, []);
  const state = useResults(
    () => (chosen ? related(socket, chosen.text) : Promise.resolve(NOTHING)),
    chosen ? `${chosen.from}:${chosen.text}` : String(chosen),
  );
  const unreadable = state.error instanceof DaemonError && state.error.code === "bad_args";
  return (
    <List
      isLoading={chosen === undefined || (Boolean(chosen) && state.loading)}
      isShowingDetail={Boolean(chosen) && state.results.hits.length > 0}
      navigationTitle={chosen?.from === "clipboard" ? "Related to the Clipboard's Text" : "Related to the Selection"}
      searchBarPlaceholder="Filter related notes…"
    >
      {chosen === null ? (
        <List.EmptyView
          icon={Icon.Text}
          title="No text selected, and none on the clipboard"
          description="Select some text in any app (or copy it), then run Related Notes to Selected Text again."
        />
      ) : unreadable ? (
        <List.EmptyView
          icon={Icon.Warning}
          title="notewell cannot read this text"
          description={(state.error as Error).message.replace(/^text: /, "It ")}
        />
      ) : chosen ? (
        <Items state={state} />
      ) : null}
    </List>
  );
}
