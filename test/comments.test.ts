import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { sourceFiles } from "./support/source-files";

/**
 * Comments in src/ state the rule as it is. What happened, in which issue or step, and what a measurement
 * showed on the day belong in git's history and docs/benchmark-log.md. These are the phrases that tell a
 * story instead of a rule.
 */
const HISTORY: { says: string; pattern: RegExp }[] = [
  { says: "an issue", pattern: /\bissue\s*#?\d+/i },
  { says: "a step of the work", pattern: /\bstep \d+ of (?:the|this) (?:issue|work|session)\b/i },
  { says: "a past behaviour", pattern: /(?<!\b(?:is|are|be|been|was|were) )\bused to\b/i },
  { says: "a past behaviour", pattern: /\bas (?:before|it always did|it did|they did)\b/i },
  { says: "a past behaviour", pattern: /\bnow (?!that\b)[a-z]+s\b/i },
  { says: "a past behaviour", pattern: /\bwe (?:changed|fixed|found|moved|renamed|used to)\b/i },
  { says: "a dated measurement", pattern: /\bmeasured(?::| at \d| as \d)|\bwe measured\b/i },
  { says: "a dated measurement", pattern: /\b20\d\d-\d\d-\d\d\b/ },
  { says: "a dated measurement", pattern: /\b\d+(?:\.\d+)? ?(?:ms|µs) of CPU\b/ },
  { says: "a dated measurement", pattern: /\b(?:saw|took|measured) \d+(?:\.\d+)? ?(?:ms|µs|s)\b/ },
];

/** Each comment's text with its line: `//` to the end of the line, and every line of a block comment. */
function commentsOf(text: string): { line: number; text: string }[] {
  const found: { line: number; text: string }[] = [];
  let inBlock = false;
  text.split("\n").forEach((source, index) => {
    const line = index + 1;
    if (inBlock) {
      const end = source.indexOf("*/");
      found.push({ line, text: end < 0 ? source : source.slice(0, end) });
      if (end >= 0) inBlock = false;
      return;
    }
    const block = source.indexOf("/*");
    const slashes = source.search(/(?<![:"'`])\/\//);
    if (block >= 0 && (slashes < 0 || block < slashes)) {
      const end = source.indexOf("*/", block + 2);
      found.push({ line, text: source.slice(block + 2, end < 0 ? undefined : end) });
      if (end < 0) inBlock = true;
    } else if (slashes >= 0) {
      found.push({ line, text: source.slice(slashes + 2) });
    }
  });
  return found;
}

describe("comments in src/ and packages/", () => {
  it("a file in src/server longer than 400 lines says why at its top", () => {
    const unexplained = sourceFiles("src/server").filter((file) => {
      const text = readFileSync(file, "utf8");
      const top = text.startsWith("/**") ? text.slice(0, text.indexOf("*/")) : "";
      return text.split("\n").length > 400 && !/longer than 400 lines\b/i.test(top);
    });
    expect(unexplained).toEqual([]);
  });

  it("state rules, not history: no issue, step, past behaviour or dated measurement", () => {
    const stories: string[] = [];
    for (const file of [...sourceFiles("src"), ...sourceFiles("packages/idempotency/src")]) {
      for (const comment of commentsOf(readFileSync(file, "utf8"))) {
        for (const { says, pattern } of HISTORY) {
          if (pattern.test(comment.text))
            stories.push(`${file}:${comment.line} (${says}): ${comment.text.trim()}`);
        }
      }
    }
    expect(stories).toEqual([]);
  });

  it("the scan finds each kind of story it is meant to find", () => {
    const planted = [
      "// Fixed in issue 40: the lock is taken first.",
      "/* It used to reach the handler and throw. */",
      "/**\n * Answers as before.\n */",
      "// The consumer now ships what the order holds.",
      "// measured: 20 µs a row against 9",
      "// Next's pipeline, about 3.5 ms of CPU per call",
    ].join("\n");
    const found = commentsOf(planted).filter(({ text }) => HISTORY.some(({ pattern }) => pattern.test(text)));
    expect(found.map(({ line }) => line)).toEqual([1, 2, 4, 6, 7, 8]);
    // Rules that read alike are not stories.
    const rules = [
      "// The key is used to sign the cookie.",
      "// A refund that no longer fits is superseded.",
      "const url = 'http://example.com'; // the provider's",
    ].join("\n");
    expect(commentsOf(rules).filter(({ text }) => HISTORY.some(({ pattern }) => pattern.test(text)))).toEqual(
      [],
    );
  });
});
