/**
 * The route files of the production server's bundle, by route. In the sources there are none, and the route
 * table finds the files by walking src/app (./route-table.ts); the bundle (scripts/lib/server-bundle.ts) holds
 * in this module's place a table of static imports of the same files, found when it was built.
 */
export const BUNDLED_ROUTES: Record<string, () => Promise<unknown>> | undefined = undefined;
