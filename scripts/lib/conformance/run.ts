import { randomUUID } from "node:crypto";
import { request as httpRequest } from "node:http";

/**
 * The conformance kit's runner (conformance/scenarios.json, conformance/profiles/): each scenario's steps sent
 * over HTTP to a server, and what came back held to what the draft asks, under the profile's choices. A scenario
 * is pass, fail, or not applicable (the profile says the server leaves that out). Nothing here knows the
 * server: the profile says where, with what bodies, and which choices it made.
 */

export interface Profile {
  name: string;
  path: string;
  methods: string[];
  headers?: Record<string, string>;
  /** A fresh caller per run: POST here, and send the answer's `field` in `header` (with `scheme`). */
  token?: { path: string; field: string; header: string; scheme?: string };
  /** The request's JSON body; "{{unique}}" in it becomes a value of each scenario's own. */
  body: unknown;
  otherBody: unknown;
  /** A request the server answers with a client error (absent: replay-error is not applicable). */
  errorBody?: unknown;
  /** What copies sent while the first runs get: the first answer (after waiting), or a 409 at once. */
  copies: "wait-then-replay" | "immediate-409";
  /** The header that marks a replay (absent: none, and replays are checked by their body alone). */
  replayHeader?: string;
  /** Where the key's expiry policy is published (absent: expiry-policy is not applicable). */
  policyPath?: string;
}

type Expected = {
  status: number | "success" | "client-error" | "as-first" | "copies";
  problem?: boolean;
  body?: "as-first";
  replayed?: boolean;
};

export interface Step {
  key?: "sf-string" | "none" | "malformed" | "two-fields" | "fresh" | "same";
  body?: "body" | "otherBody" | "errorBody";
  copies?: number;
  each?: "method";
  policy?: boolean;
  expect: Expected;
}

export interface Scenario {
  id: string;
  section: string;
  title: string;
  needs?: "errorBody" | "policyPath";
  steps: Step[];
}

export interface Verdict {
  id: string;
  section: string;
  title: string;
  result: "pass" | "fail" | "n/a";
  why?: string;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request (node:http: a header given twice is sent as two fields). */
function send(url: URL, method: string, pairs: [string, string][], body?: string): Promise<Answer> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of pairs) {
    const had = headers[name];
    headers[name] = had === undefined ? value : [...(Array.isArray(had) ? had : [had]), value];
  }
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString("utf8"),
        }),
      );
      res.on("error", reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error("no answer within 30 s")));
    req.on("error", reject);
    req.end(body);
  });
}

const isProblem = (answer: Answer) =>
  String(answer.headers["content-type"] ?? "").includes("application/problem+json");

/** Runs every scenario against `base` under `profile`. */
export async function runConformance(
  base: string,
  profile: Profile,
  scenarios: Scenario[],
): Promise<Verdict[]> {
  const common: [string, string][] = Object.entries(profile.headers ?? {});
  if (profile.token) {
    const answer = await send(new URL(profile.token.path, base), "POST", common, "{}");
    const token = String(JSON.parse(answer.body)[profile.token.field] ?? "");
    common.push([profile.token.header, profile.token.scheme ? `${profile.token.scheme} ${token}` : token]);
  }
  const verdicts: Verdict[] = [];
  for (const scenario of scenarios) {
    const { id, section, title } = scenario;
    if (scenario.needs && profile[scenario.needs] === undefined) {
      verdicts.push({ id, section, title, result: "n/a", why: `the profile has no ${scenario.needs}` });
      continue;
    }
    const methods = scenario.steps.some((step) => step.each === "method")
      ? profile.methods
      : [profile.methods[0] ?? "POST"];
    let failure: string | undefined;
    for (const method of methods) {
      failure = await runSteps(base, profile, common, method, scenario.steps);
      if (failure) {
        failure = methods.length > 1 ? `${method}: ${failure}` : failure;
        break;
      }
    }
    verdicts.push({
      id,
      section,
      title,
      result: failure ? "fail" : "pass",
      ...(failure ? { why: failure } : {}),
    });
  }
  return verdicts;
}

/** A scenario's steps in order; the first step's answer is what "as-first" means. Returns why it failed. */
async function runSteps(
  base: string,
  profile: Profile,
  common: [string, string][],
  method: string,
  steps: Step[],
): Promise<string | undefined> {
  const key = randomUUID();
  // "{{unique}}" in a profile's body: a value of this scenario's own (the same in each of its steps).
  const unique = randomUUID();
  let first: Answer | undefined;
  for (const [index, step] of steps.entries()) {
    const at = `step ${index + 1}`;
    if (step.policy) {
      const answer = await send(new URL(profile.policyPath ?? "/", base), "GET", common);
      if (answer.status !== step.expect.status) return `${at}: the policy answered ${answer.status}`;
      continue;
    }
    const headers = [...common];
    if (step.key === "sf-string" || step.key === "fresh" || step.key === "same")
      headers.push(["idempotency-key", `"${key}"`]);
    if (step.key === "malformed") headers.push(["idempotency-key", `"${key}`]);
    if (step.key === "two-fields")
      headers.push(["idempotency-key", `"${key}"`], ["idempotency-key", `"${randomUUID()}"`]);
    const body = JSON.stringify(profile[step.body ?? "body"]).replaceAll("{{unique}}", unique);
    const url = new URL(profile.path, base);
    const answers = await Promise.all(
      Array.from({ length: step.copies ?? 1 }, () => send(url, method, headers, body)),
    );
    const answer = answers[0] as Answer;
    const expect = step.expect;
    if (expect.status === "copies") {
      const failure = copiesFailure(profile, answers);
      if (failure) return `${at}: ${failure}`;
    } else if (expect.status === "success") {
      if (answer.status < 200 || answer.status > 299)
        return `${at}: ${answer.status}, not a success: ${answer.body.slice(0, 200)}`;
    } else if (expect.status === "client-error") {
      if (answer.status < 400 || answer.status > 499) return `${at}: ${answer.status}, not a client error`;
    } else if (expect.status === "as-first") {
      if (answer.status !== first?.status) return `${at}: ${answer.status}, the first was ${first?.status}`;
    } else if (answer.status !== expect.status) {
      return `${at}: ${answer.status}, expected ${expect.status}: ${answer.body.slice(0, 200)}`;
    }
    if (expect.problem && !isProblem(answer))
      return `${at}: not application/problem+json (${answer.headers["content-type"]})`;
    if (expect.problem) {
      const problem = JSON.parse(answer.body) as { type?: unknown; title?: unknown; status?: unknown };
      if (problem.status !== undefined && problem.status !== answer.status)
        return `${at}: the problem's status is ${problem.status}`;
      if (typeof problem.title !== "string" && typeof problem.type !== "string")
        return `${at}: a problem with no type or title`;
    }
    if (expect.body === "as-first" && answer.body !== first?.body)
      return `${at}: another body than the first answer's`;
    if (expect.replayed && profile.replayHeader && answer.headers[profile.replayHeader] === undefined)
      return `${at}: no ${profile.replayHeader} header on the replay`;
    first ??= answer;
  }
  return undefined;
}

/** Copies of one request at once: one answer for all (after waiting), or that answer and 409s, per the profile. */
function copiesFailure(profile: Profile, answers: Answer[]): string | undefined {
  const successes = answers.filter((answer) => answer.status >= 200 && answer.status <= 299);
  const others = answers.filter((answer) => !successes.includes(answer));
  if (successes.length === 0)
    return `no copy succeeded (${others.map((answer) => answer.status).join(", ")})`;
  if (new Set(successes.map((answer) => answer.body)).size !== 1)
    return "the copies that succeeded got different bodies";
  if (profile.copies === "wait-then-replay" && others.length > 0)
    return `${others.length} copies were not answered the first answer (${others[0]?.status}), though the profile says they wait`;
  if (profile.copies === "immediate-409" && others.some((answer) => answer.status !== 409))
    return `a copy was answered ${others.find((answer) => answer.status !== 409)?.status}, neither the answer nor 409`;
  return undefined;
}
