import type { MinuteSeries } from "~/server/observability/observer";

const SERIES = [
  {
    title: "Duplicates absorbed",
    names: ["notification:DUPLICATE", "consume:DUPLICATE", "idempotency:replayed"],
  },
  { title: "Replays", names: ["idempotency:replayed", "idempotency:replayed_error"] },
  { title: "Conflicts (in progress)", names: ["idempotency:conflict"] },
  { title: "Payload mismatches", names: ["idempotency:mismatch"] },
  { title: "Gateway 429s", names: ["gateway:rejected"] },
] as const;

/** Small bar charts of the last 15 minutes, as counted by this app instance. */
export function Charts({ series }: { series: MinuteSeries }) {
  return (
    <div className="charts">
      {SERIES.map(({ title, names }) => {
        const points = series.last(names[0]).map((p, i) => ({
          minute: p.minute,
          count: names.reduce((sum, name) => sum + (series.last(name)[i]?.count ?? 0), 0),
        }));
        const max = Math.max(1, ...points.map((p) => p.count));
        const total = points.reduce((sum, p) => sum + p.count, 0);
        return (
          <figure key={title} className="chart" data-testid="chart">
            <svg viewBox="0 0 150 40" role="img" aria-label={`${title}: ${total} in 15 minutes`}>
              {points.map((p, i) => (
                <rect
                  key={p.minute.toISOString()}
                  x={i * 10 + 1}
                  y={40 - (p.count / max) * 38}
                  width={8}
                  height={(p.count / max) * 38}
                >
                  <title>{`${p.minute.toISOString().slice(11, 16)}: ${p.count}`}</title>
                </rect>
              ))}
            </svg>
            <figcaption>
              {title}: <strong>{total}</strong>
            </figcaption>
          </figure>
        );
      })}
    </div>
  );
}
