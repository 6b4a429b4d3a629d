import { openApiDocument } from "~/server/rest/openapi";

export function GET() {
  return Response.json(openApiDocument());
}
