import type { Metadata } from "next";
import Link from "next/link";
import { PROBLEM_TYPES, problemSlug } from "~/server/error-codes";

export const metadata: Metadata = { title: "Problem types" };

/** Every problem type the API answers with, each linking to its page. */
export default function ProblemTypesPage() {
  return (
    <article className="problem-types">
      <h2>Problem types</h2>
      <p>
        Every refusal over HTTP is an RFC 9457 problem body whose <code>type</code> is one of these pages.
      </p>
      <table>
        <thead>
          <tr>
            <th>type</th>
            <th>status</th>
            <th>what it means</th>
          </tr>
        </thead>
        <tbody>
          {Object.entries(PROBLEM_TYPES).map(([code, type]) => (
            <tr key={code}>
              <td>
                <Link href={`/problems/${problemSlug(code)}`}>{code}</Link>
              </td>
              <td>{type.status}</td>
              <td>{type.means}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </article>
  );
}
