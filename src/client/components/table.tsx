import type { ReactNode } from "react";

/**
 * A table with its column headers, or a sentence when it has no rows: every list on the merchant's pages
 * says what it would hold. `rows` are the <tr> elements.
 */
export function Table({
  columns,
  empty,
  count,
  children,
}: {
  /** Header text per column; "" for a column of buttons (named for screen readers only). */
  columns: string[];
  empty: ReactNode;
  count: number;
  children: ReactNode;
}) {
  if (count === 0) return <p className="empty">{empty}</p>;
  return (
    <table>
      <thead>
        <tr>
          {columns.map((column, i) => (
            <th key={column || `action-${i}`} scope="col">
              {column || <span className="visually-hidden">Action</span>}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{children}</tbody>
    </table>
  );
}
