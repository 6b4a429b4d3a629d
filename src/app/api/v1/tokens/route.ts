import { restDeps } from "~/server/rest/deps";
import { postToken } from "~/server/rest/handlers";

export function POST() {
  return postToken(restDeps());
}
