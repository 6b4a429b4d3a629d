/**
 * The Idempotency-Key conformance kit: `npm run conformance -- <base-url> [--profile <file>]`. Sends each
 * scenario of conformance/scenarios.json to the server and prints a verdict per scenario (pass, fail, or not
 * applicable under the profile, which states the choices the draft leaves open: conformance/profiles/).
 * Exits 1 when a scenario fails.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { type Profile, runConformance, type Scenario } from "./lib/conformance/run";

const args = process.argv.slice(2);
const base = args.find((arg) => !arg.startsWith("--") && args[args.indexOf(arg) - 1] !== "--profile");
const profileFile = args[args.indexOf("--profile") + 1] ?? "conformance/profiles/app.json";
if (!base || (args.includes("--profile") && args.indexOf("--profile") === args.length - 1)) {
  console.error("usage: npm run conformance -- <base-url> [--profile conformance/profiles/app.json]");
  process.exit(2);
}
const profile = JSON.parse(readFileSync(path.resolve(profileFile), "utf8")) as Profile;
const { draft, scenarios } = JSON.parse(readFileSync(path.resolve("conformance/scenarios.json"), "utf8")) as {
  draft: string;
  scenarios: Scenario[];
};
const verdicts = await runConformance(base, profile, scenarios);
console.log(`${draft}, ${profile.name}, at ${base}\n`);
console.log("| scenario | section | result | why |\n|---|---|---|---|");
for (const v of verdicts)
  console.log(`| ${v.id}: ${v.title} | §${v.section} | ${v.result} | ${v.why ?? ""} |`);
const failed = verdicts.filter((v) => v.result === "fail").length;
console.log(
  `\n${verdicts.filter((v) => v.result === "pass").length} passed, ${failed} failed, ${verdicts.filter((v) => v.result === "n/a").length} not applicable`,
);
process.exit(failed > 0 ? 1 : 0);
