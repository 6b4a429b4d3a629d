/**
 * The idempotency record's life, as data: its states and named transitions `FROM → TO`. Every status the
 * core writes comes from here; the app's table of machines (src/server/db/machines.ts) and the model
 * checker (scripts/model) read the same object. A transition with no FROM is the row's insertion; a deletion
 * frees the key (the model's NONE).
 */
export const RECORD_STATUSES = ["PROCESSING", "SUCCESS", "FAILED"] as const;
export type RecordStatus = (typeof RECORD_STATUSES)[number];

interface RecordTransition {
  from: readonly RecordStatus[];
  to: RecordStatus;
  on: string;
}

export const RECORD_MACHINE = {
  name: "idempotency record",
  states: RECORD_STATUSES,
  transitions: {
    claim: { from: [], to: "PROCESSING", on: "the first request with a key" },
    refuse: {
      from: [],
      to: "FAILED",
      on: "a final refusal stored in one step (the one-transaction claim rolled back with the business)",
    },
    renewLease: {
      from: ["PROCESSING"],
      to: "PROCESSING",
      on: "its holder's lease ran out: another request takes the key over, with the next lease version",
    },
    succeed: {
      from: ["PROCESSING"],
      to: "SUCCESS",
      on: "its holder stores the answer (fenced by its lease)",
    },
    fail: {
      from: ["PROCESSING"],
      to: "FAILED",
      on: "its holder stores a final refusal (fenced by its lease)",
    },
    takeOver: {
      from: ["PROCESSING", "SUCCESS", "FAILED"],
      to: "PROCESSING",
      on: "the key expired: a new request claims it, with the next lease version",
    },
  },
  deletions: {
    release: {
      from: ["PROCESSING"],
      on: "its holder failed with nothing to store: the key is freed for a retry (fenced by its lease)",
    },
    expire: {
      from: ["PROCESSING", "SUCCESS", "FAILED"],
      on: "the key expired and no live lease holds it: the cleanup forgets it (deleteExpired)",
    },
  },
} as const satisfies {
  name: string;
  states: readonly RecordStatus[];
  transitions: Record<string, RecordTransition>;
  deletions: Record<string, Omit<RecordTransition, "to">>;
};

export const RECORD = { ...RECORD_MACHINE.transitions, ...RECORD_MACHINE.deletions };

/** The one state a transition moves a record from (for a conditional update on a single FROM). */
export function from(transition: Pick<RecordTransition, "from" | "on">): RecordStatus {
  const [only, ...more] = transition.from;
  if (only === undefined || more.length > 0) throw new Error(`"${transition.on}" has no single FROM`);
  return only;
}
