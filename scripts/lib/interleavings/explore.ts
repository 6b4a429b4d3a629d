import type postgres from "postgres";
import type { Gate, GatedConnection, Step } from "./gate";

/**
 * Every interleaving of two or three actors' statements, as PostgreSQL's isolation tester runs the
 * permutations of its specs' steps (the isolation tests in PostgreSQL's source tree), for code that decides its
 * next statement from the last one's answer: the steps are not known in advance, so the schedules are
 * explored depth first, each run choosing, at every point where more than one actor has a statement
 * waiting, which goes next.
 *
 * A step let through either answers, or waits on a lock: `pg_isolation_test_session_is_blocked` tells (as
 * the isolation tester asks it), and the others go on until the lock is given up. An actor that sends no
 * statement for THINK_MS after its last answer is waiting on something of its own (a timer, another
 * actor's promise in this process): it goes on when it sends one.
 *
 * Bounded by preemptions, as CHESS bounds its schedules: switching away from the actor that ran last while
 * it still has a statement waiting costs one; switching when it cannot go on (it waits on a lock, or has
 * finished) costs nothing. With a bound of k, every schedule with at most k such switches is explored.
 */

/** One actor of a schedule: its gate, and what it does (called once per schedule). */
export interface ActorRun {
  name: string;
  gate: Gate;
  act: () => Promise<unknown>;
}

/** What a schedule did: each step let through, in order, with what it answered. */
export interface TracedStep {
  actor: string;
  text: string;
  outcome: string;
  /** It waited on a lock when it was let through. */
  blocked: boolean;
}

export interface ActorAnswer {
  name: string;
  ok: boolean;
  value: unknown;
}

export interface ScheduleRun {
  /** The actor chosen at each point of choice. */
  choices: number[];
  trace: TracedStep[];
  answers: ActorAnswer[];
  /** A replayed choice was not available (timing changed what waited): the run went on with the default. */
  diverged: boolean;
}

interface Choice {
  order: number[];
  picked: number;
  /** Preemptions spent before this choice. */
  spent: number;
  preempting: boolean[];
}

/** How long an actor may take between an answer and its next statement before it counts as waiting on its own. */
const THINK_MS = 100;
/** A step still running after this long is asked about (is it waiting on a lock?). */
const BLOCK_CHECK_AFTER_MS = 2;
/** No actor able to go on for this long: the schedule is stuck (a bug of the code or of the harness). */
const STUCK_MS = 15_000;

type State =
  | { kind: "pending"; conn: GatedConnection }
  | { kind: "running"; since: number }
  | { kind: "blocked" }
  | { kind: "thinking"; since: number }
  | { kind: "sleeping" }
  | { kind: "done" };

/**
 * Runs one schedule: `prefix` says the choices to replay; past it, each choice keeps the actor that ran
 * last when it can (no preemption), else takes the first actor able to go on.
 */
export async function runSchedule(
  actors: ActorRun[],
  prefix: number[],
  control: postgres.Sql,
): Promise<ScheduleRun & { points: Choice[] }> {
  const trace: TracedStep[] = [];
  const points: Choice[] = [];
  let diverged = false;
  let last = -1;
  let spent = 0;
  const settled = actors.map(() => false);
  const answers: ActorAnswer[] = actors.map((actor) => ({ name: actor.name, ok: false, value: undefined }));
  const lastActivity = actors.map(() => performance.now());
  /** Steps that waited on a lock when let through, with their actor: they answer later, on their own. */
  const blockedSteps = new Map<Step, { traced: TracedStep; actor: number }>();

  let wake: () => void = () => {};
  const changed = () => wake();
  for (const actor of actors) {
    actor.gate.onChange = changed;
    actor.gate.open = false;
  }
  const nextChange = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  const running = actors.map((actor, i) =>
    actor.act().then(
      (value) => {
        answers[i] = { name: actor.name, ok: true, value };
        settled[i] = true;
        changed();
      },
      (error: unknown) => {
        answers[i] = { name: actor.name, ok: false, value: error };
        settled[i] = true;
        changed();
      },
    ),
  );

  const pids = () => actors.flatMap((actor) => actor.gate.connections.map((c) => c.pid)).filter((p) => p > 0);
  const isBlocked = async (actor: ActorRun) => {
    for (const conn of actor.gate.connections) {
      if (!conn.running || conn.pid === 0) continue;
      const [row] = await control<{ blocked: boolean }[]>`
        SELECT pg_isolation_test_session_is_blocked(${conn.pid}, ${pids()}::int[]) AS blocked`;
      if (row?.blocked) return true;
    }
    return false;
  };

  const stateOf = async (i: number): Promise<State> => {
    const actor = actors[i] as ActorRun;
    const waiting = actor.gate.connections.find((conn) => conn.waiting);
    if (waiting) return { kind: "pending", conn: waiting };
    const busy = actor.gate.connections.find((conn) => conn.running);
    if (busy) {
      const since = lastActivity[i] as number;
      if (performance.now() - since < BLOCK_CHECK_AFTER_MS) return { kind: "running", since };
      return (await isBlocked(actor)) ? { kind: "blocked" } : { kind: "running", since };
    }
    if (settled[i]) return { kind: "done" };
    const since = lastActivity[i] as number;
    return performance.now() - since < THINK_MS ? { kind: "thinking", since } : { kind: "sleeping" };
  };

  /** Waits until every actor has a step waiting, waits on a lock, sleeps, or is done; returns their states. */
  const quiet = async (): Promise<State[]> => {
    const started = performance.now();
    for (;;) {
      // A step that waited on a lock and has answered since: its actor thinks from now.
      for (const [step, { traced, actor }] of blockedSteps) {
        if (!step.done) continue;
        traced.outcome = step.outcome ?? "";
        lastActivity[actor] = performance.now();
        blockedSteps.delete(step);
      }
      const states = await Promise.all(actors.map((_, i) => stateOf(i)));
      if (states.every((s) => s.kind !== "running" && s.kind !== "thinking")) return states;
      if (performance.now() - started > STUCK_MS) throw new Error("an actor ran for 15 s without settling");
      const soonest = Math.min(
        ...states.map((s) =>
          s.kind === "thinking"
            ? THINK_MS - (performance.now() - s.since)
            : s.kind === "running"
              ? BLOCK_CHECK_AFTER_MS
              : Number.POSITIVE_INFINITY,
        ),
      );
      await nextChange(Math.max(1, Math.min(soonest, 20)));
    }
  };

  try {
    for (;;) {
      let states = await quiet();
      let enabled = states.flatMap((s, i) => (s.kind === "pending" ? [i] : []));
      const stuckSince = performance.now();
      while (enabled.length === 0) {
        if (states.every((s) => s.kind === "done")) break;
        if (performance.now() - stuckSince > STUCK_MS) {
          throw new Error(`stuck: ${states.map((s, i) => `${actors[i]?.name} ${s.kind}`).join(", ")}`);
        }
        await nextChange(10);
        states = await quiet();
        enabled = states.flatMap((s, i) => (s.kind === "pending" ? [i] : []));
      }
      if (enabled.length === 0) break;

      let pick: number;
      if (enabled.length === 1) {
        pick = enabled[0] as number;
      } else {
        const preferred = enabled.includes(last) ? last : (enabled[0] as number);
        const order = [preferred, ...enabled.filter((i) => i !== preferred)];
        const preempting = order.map((i) => enabled.includes(last) && i !== last);
        const replay = prefix[points.length];
        let at = 0;
        if (replay !== undefined) {
          at = order.indexOf(replay);
          if (at < 0) {
            diverged = true;
            at = 0;
          }
        }
        points.push({ order, picked: at, spent, preempting });
        if (preempting[at]) spent++;
        pick = order[at] as number;
      }
      const state = states[pick] as { kind: "pending"; conn: GatedConnection };
      const actor = actors[pick] as ActorRun;
      const step = actor.gate.release(state.conn);
      lastActivity[pick] = performance.now();
      last = pick;
      const traced: TracedStep = { actor: actor.name, text: step.text, outcome: "", blocked: false };
      trace.push(traced);
      // Wait for its answer, or for it to wait on a lock.
      const released = performance.now();
      for (;;) {
        if (step.done) {
          traced.outcome = step.outcome ?? "";
          lastActivity[pick] = performance.now();
          break;
        }
        const waited = performance.now() - released;
        if (waited >= BLOCK_CHECK_AFTER_MS && (await isBlocked(actor))) {
          traced.blocked = true;
          blockedSteps.set(step, { traced, actor: pick });
          break;
        }
        if (waited > STUCK_MS)
          throw new Error(`${actor.name}'s step ran 15 s without answering: ${step.text}`);
        await nextChange(BLOCK_CHECK_AFTER_MS);
      }
    }
    await Promise.all(running);
  } finally {
    for (const actor of actors) {
      actor.gate.open = true;
      for (const conn of actor.gate.connections) if (conn.waiting) actor.gate.release(conn);
    }
  }
  return { choices: points.map((p) => p.order[p.picked] as number), trace, answers, diverged, points };
}

/**
 * The prefix of the next schedule to explore after `points` (depth first): the last point of choice with an
 * actor not yet taken there whose preemption still fits the bound; undefined when every schedule was run.
 */
export function nextPrefix(points: Choice[], bound: number): number[] | undefined {
  for (let i = points.length - 1; i >= 0; i--) {
    const point = points[i] as Choice;
    for (let at = point.picked + 1; at < point.order.length; at++) {
      if (point.spent + (point.preempting[at] ? 1 : 0) > bound) continue;
      return [...points.slice(0, i).map((p) => p.order[p.picked] as number), point.order[at] as number];
    }
  }
  return undefined;
}

export interface Exploration {
  schedules: number;
  diverged: number;
  /** The runs whose check found something wrong, with what. */
  bad: { run: ScheduleRun; problems: string[] }[];
  /** Ran out of the schedule budget before every schedule within the bound was run. */
  capped: boolean;
}

/** A schedule that ran, with what was found wrong with it so far. */
export interface Ended<W> {
  world: W;
  run: ScheduleRun;
  problems: string[];
}

/**
 * Explores every schedule of the actors within `bound` preemptions (at most `maxSchedules`): `begin` makes
 * a fresh world and the actors' runs for each schedule, `check` says what is wrong with its end (and brings
 * it to rest); every `batch` schedules, and after the last, `checkBatch` adds what a look at all of them
 * finds (reconciliation costs the same for one story as for twenty) and clears them away.
 */
export async function explore<W>(options: {
  bound: number;
  maxSchedules: number;
  batch: number;
  control: postgres.Sql;
  begin: () => Promise<{ world: W; actors: ActorRun[] }>;
  check: (world: W, run: ScheduleRun) => Promise<string[]>;
  checkBatch: (ended: Ended<W>[]) => Promise<void>;
}): Promise<Exploration> {
  const result: Exploration = { schedules: 0, diverged: 0, bad: [], capped: false };
  let ended: Ended<W>[] = [];
  const checkEnded = async () => {
    await options.checkBatch(ended);
    for (const { run, problems } of ended) if (problems.length > 0) result.bad.push({ run, problems });
    ended = [];
  };
  let prefix: number[] | undefined = [];
  while (prefix) {
    if (result.schedules >= options.maxSchedules) {
      result.capped = true;
      break;
    }
    const { world, actors } = await options.begin();
    const run = await runSchedule(actors, prefix, options.control);
    result.schedules++;
    if (run.diverged) result.diverged++;
    ended.push({ world, run, problems: await options.check(world, run) });
    if (ended.length >= options.batch) await checkEnded();
    prefix = nextPrefix(run.points, options.bound);
  }
  await checkEnded();
  return result;
}
