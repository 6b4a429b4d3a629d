/**
 * "What happened to this order": one lane per layer on a time axis, each second's attempts a mark (its
 * size grows with how many came), the attempt that took effect filled and ringed, the absorbed ones
 * hollow. Plain SVG, no hooks: the order page (client) and /admin (server) both draw it.
 */
export interface StoryMarkView {
  at: Date;
  count: number;
  outcome: string;
  what: string;
  effect: boolean;
}
export interface StoryLaneView {
  layer: string;
  title: string;
  summary: string;
  marks: StoryMarkView[];
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

/**
 * One mark per second and kind on a lane (what took effect apart from what was absorbed), the effects
 * drawn last so an absorbed copy in the same second never hides them.
 */
function inDrawingOrder(marks: StoryMarkView[]): StoryMarkView[] {
  const merged = new Map<string, StoryMarkView>();
  for (const m of marks) {
    const id = `${new Date(m.at).getTime()}-${m.effect}`;
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
  return [...merged.values()].sort((a, b) => Number(a.effect) - Number(b.effect));
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
            {inDrawingOrder(lane.marks).map((m) => {
              const r = Math.min(14, 4 + Math.log2(m.count) * 2.5);
              return (
                <g
                  key={`${new Date(m.at).getTime()}-${m.outcome}-${m.what}`}
                  className={m.effect ? "mark effect" : "mark"}
                >
                  <circle cx={x(m.at)} cy={LANE / 2} r={r}>
                    <title>{`${clock(new Date(m.at))} · ${m.what} · ${m.outcome} × ${m.count}${m.effect ? " (took effect)" : ""}`}</title>
                  </circle>
                  {m.count > 1 && (
                    <text x={x(m.at)} y={LANE / 2 - r - 2} className="mark-count">
                      {m.count}
                    </text>
                  )}
                </g>
              );
            })}
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
        duplicate (a number: that many in the same second). Times in UTC.
      </figcaption>
      <table>
        <thead>
          <tr>
            <th scope="col">Layer</th>
            <th scope="col">What it did</th>
          </tr>
        </thead>
        <tbody>
          {story.lanes.map((lane) => (
            <tr key={lane.layer}>
              <th scope="row">{lane.title}</th>
              <td data-testid={`story-${lane.layer}`}>{lane.summary}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  );
}
