import { restDeps } from "~/server/rest/deps";
import { postToken } from "~/server/rest/handlers";

export function POST(req: Request) {
  return postToken(restDeps(), req);
}
