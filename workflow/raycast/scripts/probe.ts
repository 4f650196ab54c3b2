/**
 * A command-line harness around the extension's daemon client, for the test suite and the
 * transport measurement (it is not part of the extension). Bundle and run it with:
 *   npx esbuild scripts/probe.ts --bundle --platform=node --outfile=/tmp/probe.js
 *   node /tmp/probe.js socket-path | command [PREFERENCE] | search QUERY | similar NOTE_ID |
 *     wording REPLY_JSON | detail HIT_JSON | bench N QUERY...
 */
import { execFileSync } from "node:child_process";
import { DaemonDown, DaemonError, results, search, similar } from "../src/daemon";
import { detailMarkdown } from "../src/marks";
import { notewellCommand, notewellHome, socketPath } from "../src/paths";
import { behindLine, newNoteLine, noticeLine, rebuildingLine, tagLine } from "../src/wording";

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const socket = socketPath();
  if (command === "socket-path") {
    console.log(JSON.stringify({ home: notewellHome(), socket }));
    return 0;
  }
  if (command === "wording") {
    // The lines the view shows for a search reply (JSON), in the order it shows them.
    const r = results(JSON.parse(rest[0] ?? "{}"));
    const lines = [
      ...(r.rebuilding ? [rebuildingLine(r.rebuilding)] : []),
      ...(r.behind ? [behindLine(r.behind)] : []),
      ...r.notices.map(noticeLine),
      ...(r.tags ?? []).map(tagLine),
      ...(r.new_note ?? []).map((n) => newNoteLine(n, r.hits.length > 0)),
    ];
    console.log(JSON.stringify(lines));
    return 0;
  }
  if (command === "detail") {
    // The detail pane's Markdown for a hit (JSON).
    console.log(JSON.stringify(detailMarkdown(JSON.parse(rest[0] ?? "{}"))));
    return 0;
  }
  if (command === "command") {
    console.log(JSON.stringify(notewellCommand({}, rest.join(" "))));
    return 0;
  }
  try {
    if (command === "search") {
      console.log(JSON.stringify(await search(socket, rest.join(" "))));
      return 0;
    }
    if (command === "similar") {
      console.log(JSON.stringify(await similar(socket, rest[0] ?? "")));
      return 0;
    }
  } catch (e) {
    const kind = e instanceof DaemonDown ? "down" : e instanceof DaemonError ? e.code : "error";
    console.log(JSON.stringify({ error: kind, message: (e as Error).message }));
    return 1;
  }
  if (command === "bench") {
    // Per keystroke: the socket from this (long-lived) process, against spawning the
    // Python client the way Alfred does; the same queries, the same daemon.
    const [n, python, client, ...queries] = rest;
    const rounds = Number(n);
    const time = async (fn: (q: string) => Promise<unknown> | unknown) => {
      const samples: number[] = [];
      for (let i = 0; i < rounds; i++) {
        const q = queries[i % queries.length];
        const t0 = process.hrtime.bigint();
        await fn(q);
        samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      samples.sort((a, b) => a - b);
      return { median: samples[Math.floor(samples.length / 2)], p90: samples[Math.floor(samples.length * 0.9)] };
    };
    const socketMs = await time((q) => search(socket, q));
    const spawnMs = await time((q) => execFileSync(python, ["-IS", client, q, "--format", "alfred"]));
    console.log(JSON.stringify({ rounds, socket: socketMs, spawn: spawnMs }));
    return 0;
  }
  console.error("usage: probe socket-path | search QUERY | similar NOTE_ID | bench N PYTHON CLIENT QUERY...");
  return 2;
}

main(process.argv.slice(2)).then((code) => process.exit(code));
