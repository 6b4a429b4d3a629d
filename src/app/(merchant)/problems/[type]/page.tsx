import type { Metadata } from "next";
import Link from "next/link";
import { notFound } from "next/navigation";
import { PROBLEM_TYPES, problemOfSlug, problemSlug } from "~/server/error-codes";

/** One page per problem type the API answers with (`type: "/problems/<slug>"`); any other slug is a 404. */
export const dynamicParams = false;

export function generateStaticParams() {
  return Object.keys(PROBLEM_TYPES).map((code) => ({ type: problemSlug(code) }));
}

export async function generateMetadata({ params }: { params: Promise<{ type: string }> }): Promise<Metadata> {
  const found = problemOfSlug((await params).type);
  return { title: found ? `${found.code}: problem type` : "Problem type" };
}

const RETRY = {
  "same key":
    "Yes: send the same request with the same Idempotency-Key again (after Retry-After, when given).",
  never: "No: the same request with the same key answers this again.",
  "after fixing the request": "Not as it is: fix the request first.",
} as const;

export default async function ProblemTypePage({ params }: { params: Promise<{ type: string }> }) {
  const found = problemOfSlug((await params).type);
  if (!found) notFound();
  const { code, type } = found;
  return (
    <article className="problem-type">
      <h2>
        <code>{code}</code> (HTTP {type.status})
      </h2>
      <dl>
        <dt>What it means</dt>
        <dd>{type.means}</dd>
        <dt>What to do</dt>
        <dd>{type.todo}</dd>
        <dt>Will retrying help?</dt>
        <dd>{RETRY[type.retry]}</dd>
      </dl>
      <p>
        Every refusal is an RFC 9457 problem body: <code>type</code> is this page, <code>code</code> the code
        above, <code>detail</code> what happened to this request.{" "}
        <Link href="/problems">All problem types</Link>.
      </p>
    </article>
  );
}
