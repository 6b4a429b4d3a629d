/** `npm run db:migrate`: applies migrations and seeds the catalogue, then exits. */
import { getEnv } from "~/env";
import { prepareDatabase } from "./lib/database";

const log = (message: string) => console.log(`[checkout] ${message}`);
const database = await prepareDatabase(getEnv(), log);
await database.stop();
