import { restDeps } from "~/server/rest/deps";
import { postToken } from "~/server/rest/handlers";

export const dynamic = "force-dynamic";

export function POST() {
  return postToken(restDeps());
}
