/**
 * The extension's AI tools (src/tools/) run as Raycast AI runs them, against a real
 * daemon, for the test suite (tests/test_raycast.py); not part of the extension. Bundle
 * and run it with:
 *   npx esbuild scripts/tools-probe.ts --bundle --platform=node \
 *     --alias:@raycast/api=./scripts/raycast-stand-in.ts --outfile=/tmp/tools-probe.js
 *   node /tmp/tools-probe.js find-notes|read-note INPUT_JSON | related TEXT |
 *     choose SELECTED CLIPBOARD
 * It prints the tool's answer as JSON, or {"error": message} when the tool throws (what
 * Raycast AI would read).
 */
import { related } from "../src/daemon";
import { socketPath } from "../src/paths";
import { chooseText } from "../src/selection";
import findNotes from "../src/tools/find-notes";
import readNote from "../src/tools/read-note";

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === "find-notes") {
      console.log(JSON.stringify(await findNotes(JSON.parse(rest[0] ?? "{}"))));
    } else if (command === "read-note") {
      console.log(JSON.stringify(await readNote(JSON.parse(rest[0] ?? "{}"))));
    } else if (command === "related") {
      console.log(JSON.stringify(await related(socketPath(), rest.join(" "))));
    } else if (command === "choose") {
      console.log(JSON.stringify(chooseText(rest[0] || undefined, rest[1] || undefined)));
    } else {
      console.error("usage: tools-probe find-notes|read-note INPUT_JSON | related TEXT | choose SELECTED CLIPBOARD");
      return 2;
    }
  } catch (e) {
    console.log(JSON.stringify({ error: (e as Error).message, kind: (e as Error).constructor.name }));
    return 1;
  }
  return 0;
}

main(process.argv.slice(2)).then((code) => process.exit(code));
