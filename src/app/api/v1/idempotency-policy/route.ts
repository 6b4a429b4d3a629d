import { getAppContext } from "~/server/app-context";
import { idempotencyPolicy } from "~/server/rest/policy";

/** The idempotency policy the IETF Idempotency-Key draft asks a server to publish (src/server/rest/policy.ts). */
export function GET() {
  return Response.json(idempotencyPolicy(getAppContext().idempotency.ttlMs));
}
