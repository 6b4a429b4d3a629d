import { readdirSync } from "node:fs";
import path from "node:path";

/**
 * The TypeScript files under `dir` (relative to the repository), tests and node_modules left out: what the
 * tests that read the source itself scan.
 */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : sourceFiles(full);
    return /\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name) ? [full] : [];
  });
}

/** README.md and every Markdown file of docs/: what the tests that read the docs check. */
export function docFiles(): string[] {
  return ["README.md", ...readdirSync("docs").map((name) => `docs/${name}`)].filter((f) => f.endsWith(".md"));
}
