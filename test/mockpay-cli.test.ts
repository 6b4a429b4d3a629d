import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { runMockPayCli, seconds } from "~/mockpay/cli";
import type { MockPayContext } from "~/mockpay/server/context";
import type { AppContext } from "~/server/app-context";
import { describe, expect, test } from "./support/fixtures";
import { orderAwaitingPayment } from "./support/scenarios";

/** One CLI command, in process: its exit code and what it printed. */
async function cli(mockPay: MockPayContext, ...argv: string[]) {
  const lines: string[] = [];
  const code = await runMockPayCli(argv, mockPay, (line) => lines.push(line));
  return { code, out: lines.join("\n") };
}

async function paymentStatus(app: AppContext, outTradeNo: string) {
  const [row] = await app.db.$client<{ status: string }[]>`
    SELECT status FROM payment_order WHERE out_trade_no = ${outTradeNo}`;
  return row?.status;
}

describe("npm run mockpay", () => {
  test("trigger payment.succeeded pays a waiting trade and prints what was sent and what the merchant answered", async ({
    app,
    mockPay,
  }) => {
    const order = await orderAwaitingPayment(app, mockPay);
    const { code, out } = await cli(mockPay, "trigger", "payment.succeeded", "--trade", order.outTradeNo);
    expect(code).toBe(0);
    expect(out).toMatch(new RegExp(`^payment.succeeded ${order.outTradeNo}: 200 acknowledged in \\d+ ms`));
    expect(out).toContain('as MockPay\'s own format; the merchant answered {"code":"SUCCESS"}');
    expect(await paymentStatus(app, order.outTradeNo)).toBe("SUCCESS");
    // Again: the same fact, sent again, answered as the duplicate it is.
    expect((await cli(mockPay, "trigger", "payment.succeeded", "--trade", order.outTradeNo)).code).toBe(0);
    const closed = await cli(mockPay, "trigger", "payment.closed", "--trade", order.outTradeNo);
    expect(closed.out).toContain(`payment.closed ${order.outTradeNo} (after success): 200 acknowledged`);
    expect(await paymentStatus(app, order.outTradeNo)).toBe("SUCCESS");
  });

  test("resend --since sends again what was made in the window, one line each", async ({ app, mockPay }) => {
    const order = await orderAwaitingPayment(app, mockPay);
    await order.confirm();
    const { code, out } = await cli(mockPay, "resend", "--since", "10m", "--trade", order.outTradeNo);
    expect(code).toBe(0);
    expect(out.split("\n").filter((line) => line.startsWith("payment.succeeded "))).toHaveLength(1);
    expect(await paymentStatus(app, order.outTradeNo)).toBe("SUCCESS");
    expect((await cli(mockPay, "resend", "--since", "10m")).out.split("\n").length).toBeGreaterThan(2);
  });

  test("mode and rotate-secret: the endpoint signs as Standard Webhooks with the key printed, both keys through the overlap", async ({
    app,
    mockPay,
  }) => {
    const listed = await cli(mockPay, "endpoints");
    expect(listed.out).toMatch(/\/api\/payments\/notify legacy ENABLED/);
    const switched = await cli(mockPay, "mode", "standard-v1");
    expect(switched.code).toBe(0);
    const first = /give the merchant (whsec_\S+)/.exec(switched.out)?.[1] ?? "";
    expect(first).toMatch(/^whsec_/);
    app.payments.standardWebhooks = { secrets: [first], publicKeys: [] };
    const order = await orderAwaitingPayment(app, mockPay);
    const paid = await cli(mockPay, "trigger", "payment.succeeded", "--trade", order.outTradeNo);
    expect(paid.out).toContain('as Standard Webhooks; the merchant answered {"code":"SUCCESS"}');

    const rotated = await cli(mockPay, "rotate-secret", "--overlap", "1h");
    const next = /give the merchant (whsec_\S+);/.exec(rotated.out)?.[1] ?? "";
    expect(next).toMatch(/^whsec_/);
    expect(rotated.out).toMatch(/the old key signs beside it until \d{4}-/);
    app.payments.standardWebhooks = { secrets: [next], publicKeys: [] };
    const another = await orderAwaitingPayment(app, mockPay);
    expect((await cli(mockPay, "trigger", "payment.succeeded", "--trade", another.outTradeNo)).code).toBe(0);
    expect(await paymentStatus(app, another.outTradeNo)).toBe("SUCCESS");
    expect((await cli(mockPay, "endpoints")).out).toMatch(
      /v1 whsec_\S+ signs until .*\n {2}v1 whsec_\S+ current/,
    );
    await cli(mockPay, "mode", "legacy");
  });

  test("a wrong command line is refused with the usage (exit 2), an unknown trade says so (exit 1), and nothing is sent", async ({
    mockPay,
  }) => {
    for (const argv of [
      [],
      ["pay"],
      ["trigger", "payment.succeeded"],
      ["trigger", "refund.teleported", "--trade", "T"],
      ["resend", "--since", "yesterday"],
      ["resend", "--since", "10m", "--colour", "red"],
      ["mode", "xml"],
      ["enable", "--endpoint", "nowhere"],
    ]) {
      const { code, out } = await cli(mockPay, ...argv);
      expect({ argv, code }).toEqual({ argv, code: 2 });
      expect(out).toContain("usage: npm run mockpay -- <command>");
    }
    const unknown = await cli(mockPay, "trigger", "payment.succeeded", "--trade", "NO_SUCH_TRADE");
    expect(unknown.code).toBe(1);
    expect(unknown.out).toMatch(/NO_SUCH_TRADE/);
    expect(seconds("90")).toBe(90);
    expect(seconds("2h")).toBe(7_200);
  });

  test("the npm script prints what it can do", async () => {
    const { stdout } = await promisify(execFile)("npx", ["tsx", "scripts/mockpay.ts", "--help"], {
      timeout: 60_000,
    });
    expect(stdout).toContain("trigger payment.succeeded --trade <out_trade_no>");
    expect(stdout).toContain("rotate-secret");
  });
});
