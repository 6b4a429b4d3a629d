import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { docFiles } from "./support/source-files";

/**
 * Every TypeScript snippet of the docs (a ```ts fence in README.md or docs/*.md) compiles against the code as
 * it is, with the project's compiler options. A snippet that is a piece of a larger file says what it stands
 * in, in an HTML comment right above its fence:
 *
 *   <!-- compile-with: import { runIdempotent } from "@exactly-once/idempotency"; declare const store: … -->
 *
 * That text goes before the snippet; the snippet's own text is compiled as written.
 */
interface Snippet {
  doc: string;
  line: number;
  context: string;
  code: string;
}

const DIR = ".docs-snippets";

function snippetsOf(doc: string): Snippet[] {
  const lines = readFileSync(doc, "utf8").split("\n");
  const found: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]?.trim() !== "```ts") continue;
    const end = lines.findIndex((line, j) => j > i && line.trim() === "```");
    // The comment above the fence, which may span lines, ending on the line before it (blank lines aside).
    let above = i - 1;
    while (above >= 0 && lines[above]?.trim() === "") above--;
    let context = "";
    if (lines[above]?.trim().endsWith("-->")) {
      let start = above;
      while (start > 0 && !lines[start]?.includes("<!--")) start--;
      const comment = lines.slice(start, above + 1).join("\n");
      const given = /<!--\s*compile-with:([\s\S]*?)-->/.exec(comment);
      if (given) context = given[1] ?? "";
    }
    found.push({ doc, line: i + 1, context, code: lines.slice(i + 1, end).join("\n") });
    i = end;
  }
  return found;
}

afterAll(() => rmSync(DIR, { recursive: true, force: true }));

describe("the docs' TypeScript snippets", () => {
  it("compile against the code as it is", () => {
    const snippets = docFiles().flatMap(snippetsOf);
    expect(snippets.length).toBeGreaterThanOrEqual(5);
    rmSync(DIR, { recursive: true, force: true });
    mkdirSync(DIR);
    const files = snippets.map((snippet, n) => {
      const file = path.resolve(DIR, `${n}-${path.basename(snippet.doc, ".md")}-${snippet.line}.ts`);
      writeFileSync(file, `${snippet.context}\n${snippet.code}\nexport {};\n`);
      return { file, snippet };
    });
    const config = ts.readConfigFile("tsconfig.json", ts.sys.readFile);
    const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, process.cwd());
    const program = ts.createProgram(
      files.map((f) => f.file),
      { ...options, noEmit: true, incremental: false, plugins: [] },
    );
    const problems = files.flatMap(({ file, snippet }) => {
      const source = program.getSourceFile(file);
      if (!source) return [`${snippet.doc}:${snippet.line}: not compiled`];
      return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)].map(
        (d) => `${snippet.doc}:${snippet.line}: ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`,
      );
    });
    expect(problems).toEqual([]);
  }, 120_000);

  it("a snippet that does not compile is found (the check can fail)", () => {
    const config = ts.readConfigFile("tsconfig.json", ts.sys.readFile);
    const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, process.cwd());
    mkdirSync(DIR, { recursive: true });
    const file = path.resolve(DIR, "broken.ts");
    writeFileSync(
      file,
      'import { runIdempotent } from "@exactly-once/idempotency";\nrunIdempotent("not a store");\nexport {};\n',
    );
    const program = ts.createProgram([file], { ...options, noEmit: true, incremental: false, plugins: [] });
    const source = program.getSourceFile(file);
    expect(source && program.getSemanticDiagnostics(source).length).toBeGreaterThan(0);
  }, 120_000);
});
