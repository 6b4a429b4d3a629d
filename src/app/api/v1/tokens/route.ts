import { restDeps } from "~/server/rest/deps";
import { deleteTokens, postToken } from "~/server/rest/handlers";

export function POST(req: Request) {
  return postToken(restDeps(), req);
}

export function DELETE(req: Request) {
  return deleteTokens(restDeps(), req);
}
