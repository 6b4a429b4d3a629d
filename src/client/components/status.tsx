import { type StatusKind, statusText } from "~/client/status-labels";

/**
 * A status as a person reads it, with the machine name beside it. `testId` goes on the machine name,
 * so tests and scripts keep reading exactly what the API says.
 */
export function Status({
  kind,
  value,
  testId,
  explain = false,
}: {
  kind: StatusKind;
  value: string;
  testId?: string;
  explain?: boolean;
}) {
  const text = statusText(kind, value);
  return (
    <span className={`status tone-${text.tone}`} title={text.next || undefined}>
      <span className="status-label">{text.label}</span> <code data-testid={testId}>{value}</code>
      {explain && text.next && <span className="status-next muted small"> {text.next}</span>}
    </span>
  );
}
