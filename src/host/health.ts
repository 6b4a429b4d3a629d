import type { IncomingMessage, ServerResponse } from "node:http";
import type postgres from "postgres";
import { schemaBehind } from "~/server/db/schema-version";

/**
 * What a load balancer or a supervisor asks the production server:
 * - `GET /healthz`: the process is alive and serving (200, always, while it listens);
 * - `GET /readyz`: it should be sent traffic: the database answers, its schema is the one this code needs,
 *   and the instance is not draining (200); else 503 with the reason.
 * The database is asked at most once a second, however many probes arrive; a schema found at head stays so.
 */
export interface Health {
  /** Set on SIGTERM: /readyz answers 503 from then on. */
  draining: boolean;
  /** Answers a health path (true), or leaves the request alone (false). */
  answer(req: IncomingMessage, res: ServerResponse): boolean;
}

const CHECK_EVERY_MS = 1_000;
const DATABASE_WAIT_MS = 2_000;

export function createHealth(sql: postgres.Sql): Health {
  let atHead = false;
  let last: { at: number; reason: Promise<string | undefined> } | undefined;
  const databaseProblem = (): Promise<string | undefined> => {
    if (last && performance.now() - last.at < CHECK_EVERY_MS) return last.reason;
    const reason = (async () => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<string>((resolve) => {
        timer = setTimeout(
          () => resolve(`the database did not answer within ${DATABASE_WAIT_MS} ms`),
          DATABASE_WAIT_MS,
        );
      });
      const asked = (async () => {
        try {
          if (atHead) {
            await sql`SELECT 1`;
            return undefined;
          }
          const behind = await schemaBehind(sql);
          atHead = behind === undefined;
          return behind;
        } catch (error) {
          return `the database does not answer: ${(error as Error).message}`;
        }
      })();
      const found = await Promise.race([asked, late]);
      clearTimeout(timer);
      return found;
    })();
    last = { at: performance.now(), reason };
    return reason;
  };
  const health: Health = {
    draining: false,
    answer(req, res) {
      const path = req.url?.split("?", 1)[0];
      if (path !== "/healthz" && path !== "/readyz") return false;
      const send = (status: number, body: Record<string, string>) => {
        const text = JSON.stringify(body);
        res.writeHead(status, {
          "content-type": "application/json",
          "cache-control": "no-store",
          "content-length": String(Buffer.byteLength(text)),
        });
        res.end(req.method === "HEAD" ? undefined : text);
      };
      if (path === "/healthz") {
        send(200, { status: "alive" });
        return true;
      }
      if (health.draining) {
        send(503, { status: "draining", reason: "the instance is stopping: send no new requests" });
        return true;
      }
      void databaseProblem().then((reason) =>
        reason ? send(503, { status: "unavailable", reason }) : send(200, { status: "ready" }),
      );
      return true;
    },
  };
  return health;
}
