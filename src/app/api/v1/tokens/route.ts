import { restDeps } from "~/server/rest/deps";
import { deleteTokens, postToken } from "~/server/rest/handlers";
import { plainRoute } from "~/shared/plain-http";

export const POST = plainRoute((req) => postToken(restDeps(), req));
export const DELETE = plainRoute((req) => deleteTokens(restDeps(), req));
