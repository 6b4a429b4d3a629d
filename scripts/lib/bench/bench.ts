import type { ChildProcess } from "node:child_process";
import type autocannon from "autocannon";
import type { Db } from "~/server/db/client";
import type { AppProcess } from "../app-process";
import type { CpuMeter } from "../cpu";
import type { Row, RuntimeWindow } from "./settings";

/** What every scenario works with: the database, the running app, its first shopper, and the table. */
export interface Bench {
  db: Db;
  url: string;
  app: AppProcess;
  cookie: string;
  userId: string;
  rows: Row[];
  cleanups: Array<() => Promise<void>>;
  count(sql: string): Promise<number>;
  /** Requests still in flight when the load stopped commit a moment later: count once nothing changes. */
  settled(sql: string): Promise<number>;
  appCpu(): number;
  meter(): CpuMeter;
  total(r: autocannon.Result): number;
  /**
   * A row from an autocannon result; its RSS is the app's (or `process`'s, when given). `rounds`: the runs of
   * each interleaved round that `r` combines, for the per-round ratios; `runtime`: the app's runtime in each.
   */
  add(
    id: string,
    scenario: string,
    r: autocannon.Result,
    correctness: string,
    ok: boolean,
    cpu: CpuMeter,
    process?: ChildProcess,
    rounds?: autocannon.Result[],
    runtime?: (RuntimeWindow | undefined)[],
  ): void;
}
