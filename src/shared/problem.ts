/** The `type` slug of a code (`/problems/<slug>` is its page: src/server/error-codes.ts). */
export const problemSlug = (code: string) => code.toLowerCase().replaceAll("_", "-");

/** An RFC 9457 problem body: the one shape every refusal over HTTP takes, from the REST API to the server's own. */
export function problemBody(
  status: number,
  code: string,
  detail: string,
  extra: Record<string, unknown> = {},
) {
  return {
    type: `/problems/${problemSlug(code)}`,
    title: code
      .replaceAll("_", " ")
      .toLowerCase()
      .replace(/^./, (c) => c.toUpperCase()),
    status,
    detail,
    code,
    ...extra,
  };
}

export const PROBLEM_HEADERS = { "content-type": "application/problem+json", "cache-control": "no-store" };
