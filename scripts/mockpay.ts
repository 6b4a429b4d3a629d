/**
 * `npm run mockpay -- <command>`: MockPay's CLI (src/mockpay/cli.ts), against the database of `npm start`
 * (the embedded one, or DATABASE_URL). `npm run mockpay` alone prints what it can do.
 */
import { CLI_USAGE, runMockPayCli } from "~/mockpay/cli";
import { getMockPayContext } from "~/mockpay/server/context";
import { assertDriverPatched } from "~/shared/postgres-driver";

assertDriverPatched();
const argv = process.argv.slice(2);
if (argv.length === 0 || argv[0] === "help" || argv[0] === "--help") {
  console.log(CLI_USAGE);
  process.exit(0);
}
const mockPay = getMockPayContext();
let code = 1;
try {
  code = await runMockPayCli(argv, mockPay, (line) => console.log(line));
} catch (error) {
  console.error(`mockpay: ${error instanceof Error ? error.message : String(error)}`);
} finally {
  await mockPay.db.$client.end({ timeout: 1 });
}
process.exit(code);
