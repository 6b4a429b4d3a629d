/**
 * "What happened to this order": one lane per layer on a time axis, each second's attempts a mark (its
 * size grows with how many came), the attempt that took effect filled, the absorbed ones hollow and set
 * beside it, one mark per thing that absorbed them, each naming it. Plain SVG, no hooks: the order page
 * (client) and /admin (server) both draw it.
 */
export interface StoryMarkView {
  at: Date;
  count: number;
  outcome: string;
  what: string;
  effect: boolean;
  /** What absorbed these copies ("" for the one that took effect). */
  absorbedBy: string;
}
export interface StoryLaneView {
  layer: string;
  title: string;
  summary: string;
  marks: StoryMarkView[];
  absorbers: { by: string; count: number }[];
}
export interface StoryView {
  lanes: StoryLaneView[];
  absorbed: number;
}

const WIDTH = 760;
const LABEL = 185;
const LANE = 40;
const AXIS = 28;

const clock = (d: Date) => d.toISOString().slice(11, 19);

/** A mark as drawn: its place in its second (0: first), and its radius. */
type Placed = StoryMarkView & { slot: number; r: number };

const radius = (count: number) => Math.min(14, 4 + Math.log2(count) * 2.5);

/**
 * One mark per second for what took effect, and one per absorber beside it (never on top: three copies
 * in one second, one processed and two absorbed, are two marks, the effect first). Within a second the
 * marks sit side by side, `slot` apart.
 */
export function placeMarks(marks: StoryMarkView[]): Placed[] {
  const merged = new Map<string, StoryMarkView>();
  for (const m of marks) {
    const id = `${new Date(m.at).getTime()}\u0000${m.effect ? "" : m.absorbedBy}`;
    const known = merged.get(id);
    if (known) {
      merged.set(id, {
        ...known,
        count: known.count + m.count,
        outcome: known.outcome === m.outcome ? known.outcome : `${known.outcome}, ${m.outcome}`,
        what: known.what === m.what ? known.what : `${known.what}, ${m.what}`,
      });
    } else merged.set(id, { ...m });
  }
  const bySecond = new Map<number, StoryMarkView[]>();
  for (const m of merged.values()) {
    const second = new Date(m.at).getTime();
    bySecond.set(second, [...(bySecond.get(second) ?? []), m]);
  }
  return [...bySecond.values()].flatMap((group) => {
    const ordered = [...group].sort(
      (a, b) => Number(b.effect) - Number(a.effect) || a.absorbedBy.localeCompare(b.absorbedBy),
    );
    let offset = 0;
    return ordered.map((m, i) => {
      const r = radius(m.count);
      if (i > 0) offset += radius(ordered[i - 1]?.count ?? 1) + r + 3;
      return { ...m, slot: offset, r };
    });
  });
}

export function StoryPicture({ story }: { story: StoryView }) {
  const times = story.lanes.flatMap((lane) => lane.marks.map((m) => new Date(m.at).getTime()));
  const start = times.length ? Math.min(...times) : Date.now();
  const end = Math.max(start + 2_000, ...(times.length ? times : [start]));
  const x = (at: Date) =>
    LABEL + 12 + ((new Date(at).getTime() - start) / (end - start)) * (WIDTH - LABEL - 36);
  const height = story.lanes.length * LANE + AXIS;
  const ticks = [0, 1 / 3, 2 / 3, 1].map((f) => new Date(start + f * (end - start)));
  return (
    <figure className="story" data-testid="order-story">
      <svg
        viewBox={`0 0 ${WIDTH} ${height}`}
        role="img"
        aria-label={`Attempts per layer over time; ${story.absorbed} duplicate(s) absorbed, each effect once`}
      >
        {story.lanes.map((lane, i) => (
          <g key={lane.layer} transform={`translate(0 ${i * LANE})`}>
            <rect x={0} y={0} width={WIDTH} height={LANE} className={i % 2 ? "lane odd" : "lane"} />
            <text x={8} y={LANE / 2 + 4} className="lane-title">
              {lane.title}
            </text>
            <line x1={LABEL} x2={WIDTH - 12} y1={LANE / 2} y2={LANE / 2} className="lane-line" />
            {placeMarks(lane.marks).map((m) => (
              <g
                key={`${new Date(m.at).getTime()}-${m.effect}-${m.absorbedBy}`}
                className={m.effect ? "mark effect" : "mark"}
                data-absorbed-by={m.effect ? undefined : m.absorbedBy}
              >
                <circle cx={x(m.at) + m.slot} cy={LANE / 2} r={m.r}>
                  <title>{`${clock(new Date(m.at))} · ${m.what} · ${m.outcome} × ${m.count}: ${m.effect ? "took effect" : `absorbed by ${m.absorbedBy}`}`}</title>
                </circle>
                {m.count > 1 && (
                  <text x={x(m.at) + m.slot} y={LANE / 2 - m.r - 2} className="mark-count">
                    {m.count}
                  </text>
                )}
              </g>
            ))}
          </g>
        ))}
        <g transform={`translate(0 ${story.lanes.length * LANE})`}>
          {ticks.map((t) => (
            <text key={t.getTime()} x={x(t)} y={18} className="tick">
              {clock(t)}
            </text>
          ))}
        </g>
      </svg>
      <figcaption>
        <span className="legend effect">●</span> took effect <span className="legend">○</span> absorbed as a
        duplicate, beside it in its second, one mark per thing that absorbed it (a number: that many). Hover a
        mark for what absorbed it. Times in UTC.
      </figcaption>
      <table>
        <thead>
          <tr>
            <th scope="col">Layer</th>
            <th scope="col">What it did</th>
            <th scope="col">What absorbed the copies</th>
          </tr>
        </thead>
        <tbody>
          {story.lanes.map((lane) => (
            <tr key={lane.layer}>
              <th scope="row">{lane.title}</th>
              <td data-testid={`story-${lane.layer}`}>{lane.summary}</td>
              <td data-testid={`story-${lane.layer}-absorbers`}>
                {lane.absorbers.length === 0 ? (
                  "—"
                ) : (
                  <ul className="absorbers">
                    {lane.absorbers.map((a) => (
                      <li key={a.by}>
                        {a.count} × {a.by}
                      </li>
                    ))}
                  </ul>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  );
}
