import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { findRouteFiles } from "~/host/route-table";
import { docFiles } from "./support/source-files";

/**
 * What the docs name must be there: every file or folder of the repository a doc names in backticks, every
 * npm script it tells someone to run, and every API route it names with its method. A doc that outlives a
 * rename fails here.
 */
const DOCS = docFiles();
const TOP = ["src", "scripts", "test", "docs", "drizzle", "e2e", "examples", "model", "chaos", "patches"];

/** `a/{b,c}.ts` → `a/b.ts`, `a/c.ts`. */
const expand = (path: string): string[] => {
  const brace = path.match(/\{([^}]*)\}/);
  if (!brace) return [path];
  return (brace[1] ?? "").split(",").flatMap((part) => expand(path.replace(brace[0], part)));
};

describe("what the docs name exists", () => {
  it("every path a doc names in backticks (the bench's log names the paths of its day)", () => {
    const missing = DOCS.filter((doc) => !doc.endsWith("benchmark-log.md")).flatMap((doc) =>
      [...readFileSync(doc, "utf8").matchAll(/`([a-z]+\/[^`\s]*)`/g)]
        .map((m) => (m[1] ?? "").replace(/[:#].*$/, ""))
        .filter((path) => TOP.includes(path.split("/")[0] ?? "") && !/[*<>]/.test(path))
        .flatMap(expand)
        .filter((path) => !existsSync(path))
        .map((path) => `${doc}: ${path}`),
    );
    expect(missing).toEqual([]);
  });

  it("every npm script a doc tells someone to run", () => {
    const scripts = Object.keys(JSON.parse(readFileSync("package.json", "utf8")).scripts);
    const missing = DOCS.flatMap((doc) =>
      [...readFileSync(doc, "utf8").matchAll(/npm run ([a-z][\w:-]*)/g)]
        .map((m) => m[1] ?? "")
        .filter((name) => !scripts.includes(name))
        .map((name) => `${doc}: npm run ${name}`),
    );
    expect(missing).toEqual([]);
  });

  it("every API route a doc names, with its method", () => {
    // What the route files serve: each route's pattern and the methods its file exports.
    const served = findRouteFiles("src/app").map(({ route, file }) => {
      const text = readFileSync(file, "utf8");
      const methods = ["GET", "POST", "PUT", "PATCH", "DELETE"].filter((method) =>
        new RegExp(`export (async )?(function|const) ${method}\\b|as ${method}\\b`).test(text),
      );
      const pattern = new RegExp(`^${route.replace(/\[[^\]]+\]/g, "[^/]+")}$`);
      return { pattern, methods };
    });
    const missing = DOCS.flatMap((doc) =>
      [
        ...readFileSync(doc, "utf8").matchAll(
          /`(GET|POST|PUT|PATCH|DELETE) (\/(?:api|provider\/api)\/[^`\s?]*)/g,
        ),
      ]
        .filter(([, method, path]) => {
          const concrete = (path ?? "").replace(/\{[^}]+\}|<[^>]+>/g, "x");
          return !served.some(
            (route) => route.pattern.test(concrete) && route.methods.includes(method ?? ""),
          );
        })
        .map(([, method, path]) => `${doc}: ${method} ${path}`),
    );
    expect(missing).toEqual([]);
  });

  it("the route table of docs/api.md names every route file", () => {
    const doc = readFileSync("docs/api.md", "utf8");
    const table = doc.slice(doc.indexOf("Route handlers (every `route.ts`"), doc.indexOf("\nPages:"));
    const named = [...table.matchAll(/`(?:(?:GET|POST|PUT|PATCH|DELETE) )?(\/[^`\s]*)`/g)].map(
      (m) => new RegExp(`^${(m[1] ?? "").replace(/\{[^}]+\}/g, "[^/]+").replace(/\*$/, ".*")}$`),
    );
    const unnamed = findRouteFiles("src/app")
      .map(({ route }) => route.replace(/\[[^\]]+\]/g, "x"))
      .filter((route) => !named.some((pattern) => pattern.test(route)));
    expect(named.length).toBeGreaterThan(5);
    expect(unnamed).toEqual([]);
  });

  it("the layer table lists the seven layers", () => {
    const doc = readFileSync("docs/architecture.md", "utf8");
    const table = doc.slice(
      doc.indexOf("## The seven layers"),
      doc.indexOf("\n## ", doc.indexOf("## The seven layers") + 1),
    );
    const layers = [...table.matchAll(/^\| ([a-z ]+) \| `/gm)].map((m) => m[1]);
    expect(layers).toEqual([
      "client",
      "gateway",
      "service",
      "database",
      "state machines",
      "messages",
      "callbacks",
    ]);
  });
});
