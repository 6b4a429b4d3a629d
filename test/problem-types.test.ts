import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DOMAIN_CODES, PROBLEM_TYPES, problemOfSlug } from "~/server/error-codes";
import { DOMAIN_ERROR_CODES } from "~/server/errors";
import { problemBody } from "~/shared/problem";
import { sourceFiles } from "./support/source-files";

/** Every `problem(status, "CODE", …)` and `sendProblem(res, status, "CODE", …)` the source answers with. */
function answeredBySource(): { code: string; status: number; at: string }[] {
  const found: { code: string; status: number; at: string }[] = [];
  for (const file of sourceFiles("src")) {
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(/\b(?:problem|sendProblem)\(\s*(?:\w+,\s*)?(\d{3}),\s*"([A-Z_]+)"/g)) {
      found.push({ status: Number(match[1]), code: match[2] as string, at: file });
    }
  }
  return found;
}

describe("problem types: each refusal's `type` leads to a page (RFC 9457)", () => {
  it("every domain code has one, with an HTTP status and a tRPC code that agree", () => {
    const TRPC_STATUS: Record<string, number> = {
      BAD_REQUEST: 400,
      UNAUTHORIZED: 401,
      NOT_FOUND: 404,
      CONFLICT: 409,
      PRECONDITION_FAILED: 412,
      UNPROCESSABLE_CONTENT: 422,
      TOO_MANY_REQUESTS: 429,
      SERVICE_UNAVAILABLE: 503,
    };
    for (const code of DOMAIN_ERROR_CODES) {
      expect(PROBLEM_TYPES[code], code).toBe(DOMAIN_CODES[code]);
      expect(TRPC_STATUS[DOMAIN_CODES[code].trpc], code).toBe(DOMAIN_CODES[code].status);
    }
  });

  it("every code the HTTP layer answers with itself has one, with that status", () => {
    const answered = answeredBySource();
    expect(answered.length).toBeGreaterThanOrEqual(7);
    for (const { code, status, at } of answered)
      expect(PROBLEM_TYPES[code]?.status, `${code} (${at})`).toBe(status);
  });

  it("a problem body's type is the slug of its code's page", () => {
    for (const code of Object.keys(PROBLEM_TYPES)) {
      const { type } = problemBody(400, code, "");
      expect(problemOfSlug(type.replace("/problems/", ""))?.code).toBe(code);
    }
    expect(problemOfSlug("no-such-problem")).toBeUndefined();
  });

  it("says for each what it means and what to do", () => {
    for (const [code, type] of Object.entries(PROBLEM_TYPES)) {
      expect(type.means.length, code).toBeGreaterThan(20);
      expect(type.todo.length, code).toBeGreaterThan(15);
    }
  });
});
