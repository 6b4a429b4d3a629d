import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AppServer, startAppServer } from "./support/app-server";
import { createTestDatabase, type TestDatabase } from "./support/database";
import { docFiles } from "./support/source-files";

/**
 * The docs' shell examples, run. Every ```sh block in README.md and docs/*.md says on the line before it
 * whether it is run here (`<!-- example: run … -->`) or why not (`<!-- example: not run … -->`); a run block
 * goes to bash against the built server (its `http://localhost:3000` replaced by the server's address) and,
 * when an `<!-- example: output -->` block follows it, must print those lines, in that order (`…` stands for
 * anything; ids and dates are compared as ids and dates).
 */
const DOCS = docFiles();

interface Example {
  file: string;
  line: number;
  marker: string;
  script: string;
  output?: string[];
}

/** The shell examples of a document, each with its marker and the output it promises. */
function examplesOf(file: string, text: string): Example[] {
  const lines = text.split("\n");
  const examples: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== "```sh") continue;
    const end = lines.indexOf("```", i + 1);
    const marker = /^<!-- example: (.*) -->$/.exec(lines[i - 1] ?? "")?.[1] ?? "";
    const example: Example = { file, line: i + 1, marker, script: lines.slice(i + 1, end).join("\n") };
    // Its output: the next fenced block, if the line before it says so (prose may come between).
    for (let j = end + 1; j < lines.length && !lines[j]?.startsWith("```"); j++) {
      if (lines[j] === "<!-- example: output -->" && lines[j + 1] === "```") {
        const close = lines.indexOf("```", j + 2);
        example.output = lines.slice(j + 2, close).filter((line) => line.trim() !== "");
        break;
      }
    }
    examples.push(example);
    i = end;
  }
  return examples;
}

const normal = (line: string) =>
  line
    .replace(/\r$/, "")
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<id>")
    .replace(/\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT/g, "<date>");

/** The promised lines missing from what was printed (each in order, after the one before it). */
function missingLines(promised: string[], printed: string): string[] {
  const actual = printed.split("\n").map(normal);
  const missing: string[] = [];
  let from = 0;
  for (const line of promised) {
    const pattern = new RegExp(
      `^${normal(line)
        .split("…")
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
        .join(".*")}$`,
    );
    const at = actual.findIndex((candidate, index) => index >= from && pattern.test(candidate));
    if (at < 0) missing.push(line);
    else from = at + 1;
  }
  return missing;
}

const run = promisify(execFile);
let t: TestDatabase;
let server: AppServer;
const cwd = mkdtempSync(path.join(os.tmpdir(), "docs-examples-"));

beforeAll(async () => {
  t = await createTestDatabase({ poolSize: 1 });
  server = await startAppServer({ databaseUrl: t.url });
}, 120_000);
afterAll(async () => {
  await server?.stop();
  await t?.drop();
  rmSync(cwd, { recursive: true, force: true });
});

const all = DOCS.flatMap((file) => examplesOf(file, readFileSync(file, "utf8")));

describe("the docs' shell examples", () => {
  it("each says whether the docs test runs it, and why not when it does not", () => {
    const unmarked = all.filter((e) => !/^(run|not run)\b/.test(e.marker)).map((e) => `${e.file}:${e.line}`);
    expect(unmarked).toEqual([]);
    expect(all.filter((e) => e.marker.startsWith("run")).length).toBeGreaterThanOrEqual(2);
  });

  for (const example of all.filter((e) => e.marker.startsWith("run"))) {
    it(`${example.file}:${example.line} runs and prints what the doc says`, async () => {
      const script = example.script.replaceAll("http://localhost:3000", server.baseUrl);
      const { stdout } = await run("bash", ["-e", "-o", "pipefail", "-c", script], { cwd, timeout: 30_000 });
      expect(missingLines(example.output ?? [], stdout)).toEqual([]);
    });
  }

  it("would fail on an example that no longer prints what its doc says", () => {
    const printed = "HTTP/1.1 201 Created\nlocation: /api/v1/orders/fc1a2fa3-8f6a-41d8-bc02-63b5f17da11b\n{}";
    expect(missingLines(["HTTP/1.1 201 Created", "location: /api/v1/orders/…"], printed)).toEqual([]);
    expect(missingLines(["HTTP/1.1 200 OK"], printed)).toEqual(["HTTP/1.1 200 OK"]);
    // In order: a line promised after another must come after it.
    expect(missingLines(["location: …", "HTTP/1.1 201 Created"], printed)).toEqual(["HTTP/1.1 201 Created"]);
    const [unmarked] = examplesOf("x.md", "text\n```sh\necho hi\n```\n");
    expect(unmarked?.marker).toBe("");
  });
});
