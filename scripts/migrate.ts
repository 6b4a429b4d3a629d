/** `npm run db:migrate`: applies migrations and seeds the catalogue, then exits. */
import { getEnv } from "~/env";
import { assertDriverPatched } from "~/shared/postgres-driver";
import { prepareDatabase } from "./lib/database";

// Refuses to run on a postgres.js installed without our patch (npm ci --ignore-scripts), naming the fix.
assertDriverPatched();

const log = (message: string) => console.log(`[checkout] ${message}`);
const database = await prepareDatabase(getEnv(), log);
await database.stop();
