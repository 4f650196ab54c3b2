/**
 * Search Notes: notewell's results while you type, with the same actions as the Alfred
 * workflow (Open, Show in Finder, Copy Passage, Copy Link, Quick Look, Similar Notes) and a
 * detail pane with the matching passage.
 */
import {
  Action,
  ActionPanel,
  Icon,
  List,
  Toast,
  getPreferenceValues,
  showToast,
} from "@raycast/api";
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { useEffect, useRef, useState } from "react";
import {
  DaemonDown,
  DaemonError,
  Hit,
  NewNote,
  Results,
  TagCount,
  markdownLink,
  search,
  similar,
  startDaemon,
} from "./daemon";
import { detailMarkdown } from "./marks";
import { notewellCommand, notewellHome, socketPath } from "./paths";
import { APP_NAMES, behindLine, newNoteLine, noticeLine, rebuildingLine, tagLine } from "./wording";

interface Preferences {
  notewellHome?: string;
  notewellCommand?: string;
}

interface State {
  results: Results;
  error?: Error;
  loading: boolean;
}

const EMPTY: Results = { hits: [], notices: [] };
const KIND_ICONS: Record<string, string> = { bear: "bear.png", obsidian: "obsidian.png", markdown: "markdown.png" };

export function usePlace() {
  const prefs = getPreferenceValues<Preferences>();
  const home = (prefs.notewellHome ?? "").trim();
  return { prefs, socket: socketPath({ notewellHome: home }), home: home ? notewellHome({ notewellHome: home }) : "" };
}

/**
 * Results for `key`, fetched again when it changes. Answers to superseded requests are
 * dropped, so a slow answer for an old query never replaces a newer one; while the daemon
 * warms up, or rebuilds a damaged index, the request is retried (as Alfred re-runs).
 */
export function useResults(fetch: () => Promise<Results>, key: string): State & { reload: () => void } {
  const [state, setState] = useState<State>({ results: EMPTY, loading: true });
  const [attempt, setAttempt] = useState(0);
  const latest = useRef(0);
  useEffect(() => {
    const seq = ++latest.current;
    let retry: ReturnType<typeof setTimeout> | undefined;
    setState((s) => ({ ...s, loading: true }));
    fetch().then(
      (results) => {
        if (seq !== latest.current) return;
        setState({ results, loading: false });
        if (results.rebuilding) retry = setTimeout(() => setAttempt((a) => a + 1), 1000);
      },
      (error: Error) => {
        if (seq !== latest.current) return;
        if (error instanceof DaemonError && error.code === "warming_up") {
          setState((s) => ({ ...s, error, loading: true }));
          retry = setTimeout(() => setAttempt((a) => a + 1), 300);
          return;
        }
        setState({ results: EMPTY, error, loading: false });
      },
    );
    return () => {
      if (retry) clearTimeout(retry);
    };
  }, [key, attempt]);
  return { ...state, reload: () => setAttempt((a) => a + 1) };
}

export default function SearchNotes() {
  const { socket } = usePlace();
  const [query, setQuery] = useState("");
  const state = useResults(() => search(socket, query), query);
  return (
    <List
      isLoading={state.loading}
      isShowingDetail={state.results.hits.length > 0}
      throttle
      searchText={query}
      onSearchTextChange={setQuery}
      searchBarPlaceholder="Search your notes by meaning (#tag, in:source)…"
    >
      <Items state={state} setQuery={setQuery} />
    </List>
  );
}

function SimilarNotes({ hit }: { hit: Hit }) {
  const { socket } = usePlace();
  const state = useResults(() => similar(socket, hit.note_id), hit.note_id);
  return (
    <List
      isLoading={state.loading}
      isShowingDetail={state.results.hits.length > 0}
      navigationTitle={`Similar to ${hit.title}`}
      searchBarPlaceholder="Filter similar notes…"
    >
      <Items state={state} />
    </List>
  );
}

export function Items({ state, setQuery }: { state: State & { reload: () => void }; setQuery?: (q: string) => void }) {
  const { error, results } = state;
  if (error instanceof DaemonDown) return <DaemonDownView onStarted={state.reload} />;
  if (error && !(error instanceof DaemonError && error.code === "warming_up")) {
    return (
      <List.EmptyView
        icon={Icon.Warning}
        title="notewell could not answer"
        description={`${error.message}\nRun \`notewell doctor\` in a terminal for a diagnosis.`}
      />
    );
  }
  if (error) return <List.EmptyView icon={Icon.Clock} title="notewell is starting…" description="Loading the model and index" />;
  const notice = (key: string, line: { title: string; subtitle: string }, icon = Icon.Info) => (
    <List.Item key={key} icon={icon} title={line.title} subtitle={line.subtitle} />
  );
  return (
    <>
      {results.rebuilding ? notice("rebuilding", rebuildingLine(results.rebuilding), Icon.Hammer) : null}
      {results.behind ? notice("behind", behindLine(results.behind), Icon.Clock) : null}
      {results.notices.map((text) => notice(`notice:${text}`, noticeLine(text)))}
      {setQuery
        ? (results.tags ?? []).map((t) => <TagItem key={`tag:${t.tag}`} tag={t} setQuery={setQuery} />)
        : null}
      {results.hits.map((hit) => (
        <HitItem key={hit.note_id} hit={hit} />
      ))}
      {(results.new_note ?? []).map((n) => (
        <NewNoteItem key={`new-note:${n.source}`} note={n} found={results.hits.length > 0} />
      ))}
      {!state.loading && results.hits.length === 0 && !(results.new_note ?? []).length && !(results.tags ?? []).length ? (
        <List.EmptyView icon={Icon.MagnifyingGlass} title="No notes match" description="Try other words, or fewer of them" />
      ) : null}
    </>
  );
}

function DaemonDownView({ onStarted }: { onStarted: () => void }) {
  const { prefs, home } = usePlace();
  const command = notewellCommand({ notewellHome: prefs.notewellHome?.trim() }, prefs.notewellCommand ?? "");
  const start = async () => {
    if (command.length === 0) {
      await showToast(
        Toast.Style.Failure,
        "Run `notewell agent install` once, or set the notewell command in the extension's preferences",
      );
      return;
    }
    const toast = await showToast(Toast.Style.Animated, "Starting notewell…");
    try {
      await startDaemon(command, home);
      toast.style = Toast.Style.Success;
      toast.title = "notewell started";
      onStarted();
    } catch (e) {
      toast.style = Toast.Style.Failure;
      toast.title = "Could not start notewell";
      toast.message = (e as Error).message;
    }
  };
  return (
    <List.EmptyView
      icon={Icon.Plug}
      title="notewell is not running"
      description="Press Enter to start it, or run `notewell agent install` once so it starts at login."
      actions={
        <ActionPanel>
          <Action title="Start notewell" icon={Icon.Play} onAction={start} />
          <Action.CopyToClipboard title="Copy Start Command" content="notewell agent start" />
        </ActionPanel>
      }
    />
  );
}

/** A tag while "#wor" is typed: Enter searches it, the second action goes into its nested tags. */
function TagItem({ tag, setQuery }: { tag: TagCount; setQuery: (q: string) => void }) {
  const line = tagLine(tag);
  return (
    <List.Item
      title={line.title}
      subtitle={line.subtitle}
      icon={Icon.Tag}
      actions={
        <ActionPanel>
          <Action title={`Search #${tag.tag}`} icon={Icon.MagnifyingGlass} onAction={() => setQuery(`#${tag.tag} `)} />
          {tag.nested ? (
            <Action title="Show Nested Tags" icon={Icon.ChevronRight} onAction={() => setQuery(`#${tag.tag}/`)} />
          ) : null}
        </ActionPanel>
      }
    />
  );
}

/** "New note: QUERY": the source's app creates it through its URL scheme (Bear's create,
 * Obsidian's new, a folder's editor template); notewell never writes a note itself. */
function NewNoteItem({ note, found }: { note: NewNote; found: boolean }) {
  const app = APP_NAMES[note.kind] ?? note.kind;
  const line = newNoteLine(note, found);
  return (
    <List.Item
      title={line.title}
      subtitle={line.subtitle}
      icon={Icon.PlusCircle}
      actions={
        <ActionPanel>
          <Action.Open title={`Create in ${app}`} target={note.url} icon={Icon.Plus} />
        </ActionPanel>
      }
    />
  );
}

function HitItem({ hit }: { hit: Hit }) {
  const app = hit.kind === "markdown" ? "Default App" : (APP_NAMES[hit.kind] ?? "Default App");
  return (
    <List.Item
      title={hit.title}
      subtitle={hit.attachment ? `From attachment ${hit.attachment}` : hit.heading_path || hit.source}
      icon={{ source: KIND_ICONS[hit.kind] ?? KIND_ICONS.markdown }}
      quickLook={hit.path ? { path: hit.path, name: hit.title } : undefined}
      detail={<HitDetail hit={hit} />}
      actions={
        <ActionPanel>
          <ActionPanel.Section>
            <Action.Open title={`Open in ${app}`} target={hit.url} icon={Icon.ArrowRight} />
            {hit.path ? <Action.ShowInFinder path={hit.path} shortcut={{ modifiers: ["cmd"], key: "return" }} /> : null}
            <Action.CopyToClipboard
              title="Copy Passage"
              content={hit.passage}
              shortcut={{ modifiers: ["opt"], key: "return" }}
            />
            <Action.CopyToClipboard
              title="Copy Link"
              content={markdownLink(hit)}
              shortcut={{ modifiers: ["ctrl"], key: "return" }}
            />
            {hit.path ? (
              <Action.ToggleQuickLook shortcut={{ modifiers: ["cmd"], key: "y" }} />
            ) : (
              <Action
                title="Quick Look Passage"
                icon={Icon.Eye}
                shortcut={{ modifiers: ["cmd"], key: "y" }}
                onAction={() => quickLookPassage(hit)}
              />
            )}
            <Action.Push
              title="Similar Notes"
              icon={Icon.MagnifyingGlass}
              target={<SimilarNotes hit={hit} />}
              shortcut={{ modifiers: ["cmd", "shift"], key: "s" }}
            />
          </ActionPanel.Section>
        </ActionPanel>
      }
    />
  );
}

function HitDetail({ hit }: { hit: Hit }) {
  const Meta = List.Item.Detail.Metadata;
  return (
    <List.Item.Detail
      markdown={detailMarkdown(hit)}
      metadata={
        <Meta>
          <Meta.Label title="Source" text={`${hit.source} (${hit.kind})`} />
          {hit.heading_path ? <Meta.Label title="Section" text={hit.heading_path} /> : null}
          {hit.tags.length > 0 ? (
            <Meta.TagList title="Tags">
              {hit.tags.map((tag) => (
                <Meta.TagList.Item key={tag} text={`#${tag}`} />
              ))}
            </Meta.TagList>
          ) : null}
          {hit.modified ? <Meta.Label title="Modified" text={new Date(hit.modified * 1000).toLocaleString()} /> : null}
          {hit.path ? <Meta.Label title="File" text={hit.path} /> : null}
          {hit.archived ? <Meta.Label title="Archived" text="yes" /> : null}
        </Meta>
      }
    />
  );
}

/** A Bear note has no file to Quick Look: show its passage from a private temp file. */
function quickLookPassage(hit: Hit) {
  const dir = mkdtempSync(join(tmpdir(), "notewell-"));
  const file = join(dir, `${hit.title.replace(/[^\w .-]+/g, "_").slice(0, 80) || "passage"}.md`);
  writeFileSync(file, `# ${hit.title}\n\n${hit.passage}\n`, { mode: 0o600 });
  execFile("qlmanage", ["-p", file], () => undefined);
}
