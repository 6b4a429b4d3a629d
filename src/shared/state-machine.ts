/**
 * A state machine as data: its states and named transitions `FROM → TO`, with what sets each one off. The
 * merchant's machines (src/server/db/machines.ts) and MockPay's trade (src/mockpay/server/machine.ts) are
 * written with it; the code's conditional updates take their FROM and TO from them, and the model checker
 * reads the same tables (scripts/model/generate.ts).
 */
export interface Transition<S extends string> {
  from: readonly S[];
  to: S;
  /** What makes it happen. */
  on: string;
}

export interface Machine<S extends string, T extends string> {
  name: string;
  /** The table whose `status` column holds the state. */
  table: string;
  states: readonly S[];
  transitions: Readonly<Record<T, Transition<S>>>;
  /** Named deletions of a row (its key freed): FROM states only. */
  deletions?: Readonly<Record<string, Deletion<S>>>;
}

/** A transition to no row at all: the row is deleted, from one of its FROM states. */
export interface Deletion<S extends string> {
  from: readonly S[];
  /** What makes it happen. */
  on: string;
}

export function machine<S extends string, T extends string>(definition: Machine<S, T>): Machine<S, T> {
  const moves = [
    ...Object.entries<Transition<S>>(definition.transitions).map(
      ([name, t]) => [name, [...t.from, t.to]] as const,
    ),
    ...Object.entries<Deletion<S>>(definition.deletions ?? {}).map(([name, d]) => [name, d.from] as const),
  ];
  for (const [name, states] of moves) {
    for (const state of states) {
      if (!definition.states.includes(state)) {
        throw new Error(`${definition.name}.${name}: ${state} is not one of its states`);
      }
    }
  }
  return definition;
}

/**
 * In words, what absorbed a copy whose conditional update matched no row: the story of an order names it
 * (`the conditional update PENDING → SUCCESS matched no row: the payment is already SUCCESS`).
 */
export function absorbedByUpdate<S extends string>(
  machine: Machine<S, string>,
  transition: Transition<S>,
  now?: string,
): string {
  const state = now ? `the ${machine.name} is already ${now}` : `the ${machine.name} has moved on`;
  return `the conditional update ${transition.from.join(" | ")} → ${transition.to} matched no row: ${state}`;
}

/** The one state a transition moves from (for a conditional update on a single FROM). */
export function onlyFrom<S extends string>(transition: Transition<S>): S {
  const [from, ...more] = transition.from;
  if (from === undefined || more.length > 0)
    throw new Error(`transition to ${transition.to} has ${transition.from.length} FROM states`);
  return from;
}
