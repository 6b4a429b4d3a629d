import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { sourceFiles } from "./support/source-files";

/**
 * Request policy lives in src/server/admission/admission.ts. Read as text, every source file of src: the
 * gateway is called from `admit` alone, `admit` by one function per transport (tRPC's middleware, REST's
 * operation mount) and by `newShopper`, a shopper id is made in `newShopper` alone, and a request's context is
 * made by `requestOf`, which tRPC, REST and the proxy all call.
 */
const SRC = sourceFiles("src").map((file) => ({ file, text: readFileSync(file, "utf8") }));
const ADMISSION = path.join("src", "server", "admission", "admission.ts");

/** Each file that calls what `pattern` finds (definitions and signatures left out by the pattern), with how many times. */
function callers(pattern: RegExp): Record<string, number> {
  const found: Record<string, number> = {};
  for (const { file, text } of SRC) {
    const calls = [...text.matchAll(pattern)].length;
    if (calls > 0) found[file] = calls;
  }
  return found;
}

describe("request policy in one place", () => {
  it("the gateway is called from admit() alone", () => {
    expect(callers(/\bgateway\.admit(Client)?\(/g)).toEqual({ [ADMISSION]: 3 });
    const text = readFileSync(ADMISSION, "utf8");
    const admitBody = text.slice(
      text.indexOf("export async function admit("),
      text.indexOf("export async function newShopper("),
    );
    expect([...admitBody.matchAll(/\bgateway\.admit(Client)?\(/g)]).toHaveLength(3);
  });

  it("admit() is called once by each transport's mount and by newShopper()", () => {
    expect(callers(/(?<![.\w]|function )admit\((?!\w+: )/g)).toEqual({
      [ADMISSION]: 1,
      [path.join("src", "server", "rest", "rest-route.ts")]: 1,
      [path.join("src", "server", "trpc", "init.ts")]: 1,
    });
  });

  it("a shopper id is made in one function, and a request's context in one, used by every entry", () => {
    expect(callers(/(?<!function )\bnewGuestId\(/g)).toEqual({ [ADMISSION]: 1 });
    expect(Object.keys(callers(/(?<!function )\brequestOf\(/g)).sort()).toEqual(
      [
        path.join("src", "proxy.ts"),
        path.join("src", "server", "rest", "protocol.ts"),
        path.join("src", "server", "trpc", "context.ts"),
      ].sort(),
    );
  });
});
