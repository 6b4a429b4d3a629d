import { MinuteChart, type MinuteChartData } from "~/client/components/minute-chart";
import type { MinuteSeries } from "~/server/observability/observer";

const MINUTES = 30;

/** Each chart: its lines, each the sum of some of this instance's per-minute series. */
const CHARTS: { title: string; lines: { label: string; names: string[]; color: string }[] }[] = [
  {
    title: "Duplicates absorbed",
    lines: [
      {
        label: "replayed answers",
        names: ["idempotency:replayed", "idempotency:replayed_error"],
        color: "#0a5cd6",
      },
      { label: "waited for the first", names: ["idempotency:waited"], color: "#6b3fa0" },
      { label: "MockPay duplicates", names: ["notification:DUPLICATE"], color: "#0b7a57" },
      { label: "consumer redeliveries", names: ["consume:DUPLICATE"], color: "#8a5a00" },
      { label: "gateway 429s", names: ["gateway:rejected"], color: "#b42318" },
    ],
  },
  {
    title: "Requests refused",
    lines: [
      { label: "409 still in progress", names: ["idempotency:conflict"], color: "#8a5a00" },
      { label: "422 key reused, other payload", names: ["idempotency:mismatch"], color: "#b42318" },
      { label: "429 gateway", names: ["gateway:rejected"], color: "#6b6b70" },
      { label: "503 database away", names: ["idempotency:unavailable"], color: "#1d1d1f" },
    ],
  },
  {
    title: "Payment notifications by outcome",
    lines: [
      { label: "applied", names: ["notification:PROCESSED"], color: "#0b7a57" },
      { label: "duplicate", names: ["notification:DUPLICATE"], color: "#0a5cd6" },
      { label: "ignored (stale)", names: ["notification:IGNORED"], color: "#6b6b70" },
      {
        label: "refused",
        names: [
          "notification:WRONG_APP",
          "notification:MALFORMED",
          "notification:UNKNOWN_PAYMENT",
          "notification:AMOUNT_MISMATCH",
          "notification:TRANSACTION_CLASH",
          "notification:ERROR",
        ],
        color: "#b42318",
      },
    ],
  },
];

/** The operations page's charts: what this app instance counted, per minute. */
export function Charts({ series, now = Date.now() }: { series: MinuteSeries; now?: number }) {
  const minutes = series.last("", MINUTES, now).map((p) => p.minute.getTime() / 1000);
  const charts: MinuteChartData[] = CHARTS.map((chart) => ({
    title: chart.title,
    minutes,
    lines: chart.lines.map((line) => ({
      label: line.label,
      color: line.color,
      values: line.names
        .map((name) => series.last(name, MINUTES, now).map((point) => point.count))
        .reduce((sums, counts) => sums.map((sum, i) => sum + (counts[i] ?? 0))),
    })),
  }));
  return (
    <div className="charts">
      {charts.map((chart) => (
        <MinuteChart key={chart.title} data={chart} />
      ))}
    </div>
  );
}
