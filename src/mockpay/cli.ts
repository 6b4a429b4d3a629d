import { parseArgs } from "node:util";
import { and, eq, gte, sql } from "drizzle-orm";
import { runAdminAction } from "./server/admin";
import type { MockPayContext } from "./server/context";
import { type DeliveryResult, loadNotification, sendNotification } from "./server/delivery";
import { ENDPOINT_MODES, type EndpointMode, listEndpoints, runEndpointAction } from "./server/endpoints";
import { providerDeliveryAttempt, providerEndpoint, providerNotification } from "./server/schema";
import { confirmTrade, getTrade, type ProviderTrade } from "./server/trades";

/**
 * `npm run mockpay -- <command>`: MockPay's operator tools from a terminal, as `stripe trigger` and Svix's
 * recover are for theirs. Each prints what was sent and what the merchant answered.
 */
export const CLI_USAGE = `usage: npm run mockpay -- <command>
  trigger payment.succeeded --trade <out_trade_no>   pay a waiting trade (or take its payment's notification) and send it now
  trigger payment.closed --trade <out_trade_no>      the trade's payment.closed, sent now (after success: out of order)
  resend --since <10m|2h|1d> [--trade <no>]          send again every notification made since then
  endpoints                                          the merchant endpoints, their format, status and keys
  mode <legacy|standard-v1|standard-v1a> [--endpoint <id|url>]
  rotate-secret [--endpoint <id|url>] [--overlap <24h>]   a new signing key; the old one signs beside it meanwhile
  enable [--endpoint <id|url>]                       enable an endpoint again after a 410 Gone`;

export class UsageError extends Error {}

/** Runs one command; returns the process's exit code (2: the command line was wrong). */
export async function runMockPayCli(
  argv: string[],
  mockPay: MockPayContext,
  print: (line: string) => void,
): Promise<number> {
  try {
    const { positionals, values } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        trade: { type: "string" },
        since: { type: "string" },
        endpoint: { type: "string" },
        overlap: { type: "string" },
      },
    });
    const [command, argument] = positionals;
    switch (command) {
      case "trigger":
        return report(await trigger(mockPay, argument, required(values.trade, "--trade")), print);
      case "resend":
        return report(await resend(mockPay, seconds(required(values.since, "--since")), values.trade), print);
      case "endpoints":
        for (const { endpoint, keys } of await listEndpoints(mockPay.db)) {
          print(
            `${endpoint.id} ${endpoint.url} ${endpoint.format} ${endpoint.status}${endpoint.disabledReason ? ` (${endpoint.disabledReason})` : ""}`,
          );
          for (const key of keys) {
            print(
              `  ${key.scheme} ${key.forMerchant} ${key.retiresAt ? `signs until ${key.retiresAt.toISOString()}` : "current"}`,
            );
          }
        }
        return 0;
      case "mode": {
        if (!ENDPOINT_MODES.includes(argument as EndpointMode)) {
          throw new UsageError(`mode is one of ${ENDPOINT_MODES.join(", ")}`);
        }
        const id = await endpointId(mockPay, values.endpoint);
        print(await runEndpointAction(mockPay.db, id, { action: "MODE", mode: argument as EndpointMode }));
        return 0;
      }
      case "rotate-secret": {
        const id = await endpointId(mockPay, values.endpoint);
        const overlapS = values.overlap === undefined ? 86_400 : seconds(values.overlap);
        print(await runEndpointAction(mockPay.db, id, { action: "ROTATE", overlapS }));
        return 0;
      }
      case "enable":
        print(
          await runEndpointAction(mockPay.db, await endpointId(mockPay, values.endpoint), {
            action: "ENABLE",
          }),
        );
        return 0;
      default:
        throw new UsageError(command ? `unknown command ${command}` : "a command is needed");
    }
  } catch (error) {
    // parseArgs refuses an unknown option with a TypeError that carries a code.
    if (error instanceof UsageError || (error instanceof TypeError && "code" in error)) {
      print(`${error.message}\n${CLI_USAGE}`);
      return 2;
    }
    if (error instanceof Error && error.name === "MockPayError") {
      print(error.message);
      return 1;
    }
    throw error;
  }
}

interface Sent {
  what: string;
  result: DeliveryResult;
  /** How it was signed: MockPay's own format or Standard Webhooks. */
  sentAs: string;
  /** The merchant's answer body (or why there was none). */
  answer: string | null;
}

/** Makes a payment fact happen (or takes the one that did) and sends its notification now. */
async function trigger(
  mockPay: MockPayContext,
  type: string | undefined,
  outTradeNo: string,
): Promise<Sent[]> {
  if (type !== "payment.succeeded" && type !== "payment.closed") {
    throw new UsageError("trigger takes payment.succeeded or payment.closed");
  }
  let trade = await getTrade(mockPay.db, mockPay.appId, outTradeNo);
  if (type === "payment.succeeded" && trade.status === "WAITING") {
    trade = await confirmTrade(mockPay.db, mockPay.appId, outTradeNo);
  }
  if (type === "payment.closed" && trade.status === "PAID") {
    const results = await runAdminAction(
      mockPay.db,
      mockPay.appId,
      outTradeNo,
      { action: "CLOSED_AFTER_SUCCESS", count: 1, delayS: 30 },
      mockPay.delivery,
    );
    return Promise.all(
      results.map((result) =>
        described(mockPay, trade, `payment.closed ${outTradeNo} (after success)`, result),
      ),
    );
  }
  const [notification] = await mockPay.db
    .select({ id: providerNotification.id })
    .from(providerNotification)
    .where(and(eq(providerNotification.tradeId, trade.id), eq(providerNotification.factKey, type)));
  if (!notification) {
    throw new UsageError(`trade ${outTradeNo} is ${trade.status}: it has no ${type} to send`);
  }
  return [await sendNow(mockPay, notification.id, `${type} ${outTradeNo}`)];
}

/** Every notification made in the last `sinceS` seconds (of one trade, if named), sent again now. */
async function resend(mockPay: MockPayContext, sinceS: number, outTradeNo?: string): Promise<Sent[]> {
  const trade = outTradeNo ? await getTrade(mockPay.db, mockPay.appId, outTradeNo) : undefined;
  const notifications = await mockPay.db
    .select({ id: providerNotification.id, type: providerNotification.type })
    .from(providerNotification)
    .where(
      and(
        gte(providerNotification.createdAt, sql`now() - ${sinceS} * interval '1 second'`),
        trade ? eq(providerNotification.tradeId, trade.id) : undefined,
      ),
    )
    .orderBy(providerNotification.createdAt)
    .limit(1_000);
  const sent: Sent[] = [];
  for (const n of notifications) sent.push(await sendNow(mockPay, n.id, `${n.type} ${n.id}`));
  return sent;
}

async function sendNow(mockPay: MockPayContext, notificationId: string, what: string): Promise<Sent> {
  const { notification, trade } = await loadNotification(mockPay.db, notificationId);
  const result = await sendNotification(
    mockPay.db,
    notification,
    trade,
    { attemptNo: 0, kind: "CLI" },
    mockPay.delivery,
  );
  return described(mockPay, trade, what, result);
}

/** A send with how it was signed and the merchant's answer, as recorded with its attempt. */
async function described(
  mockPay: MockPayContext,
  trade: ProviderTrade,
  what: string,
  result: DeliveryResult,
) {
  const [attempt] = await mockPay.db
    .select({ body: providerDeliveryAttempt.responseBody, error: providerDeliveryAttempt.error })
    .from(providerDeliveryAttempt)
    .where(eq(providerDeliveryAttempt.id, result.deliveryId));
  const [endpoint] = await mockPay.db
    .select({ format: providerEndpoint.format })
    .from(providerEndpoint)
    .where(and(eq(providerEndpoint.appId, trade.appId), eq(providerEndpoint.url, trade.notifyUrl)));
  return {
    what,
    result,
    sentAs: `to ${trade.notifyUrl} as ${endpoint?.format === "standard" ? "Standard Webhooks" : "MockPay's own format"}`,
    answer: attempt?.body ?? attempt?.error ?? null,
  };
}

/** One line per send: what, the merchant's HTTP status and body, and how long it took. */
function report(sent: Sent[], print: (line: string) => void): number {
  if (sent.length === 0) print("nothing to send");
  for (const { what, result, answer, sentAs } of sent) {
    print(
      `${what}: ${result.httpStatus ?? "no answer"} ${result.ok ? "acknowledged" : "not acknowledged"} in ${result.latencyMs} ms (delivery ${result.deliveryId})`,
    );
    print(`  sent ${sentAs}; the merchant answered ${answer ?? "nothing"}`);
  }
  return sent.every((s) => s.result.ok) ? 0 : 1;
}

/** The endpoint named by id or URL; the only one there is when none is named. */
async function endpointId(mockPay: MockPayContext, named: string | undefined): Promise<string> {
  const endpoints = await mockPay.db.select().from(providerEndpoint);
  const found = named
    ? endpoints.filter((e) => e.id === named || e.url === named)
    : endpoints.length === 1
      ? endpoints
      : [];
  if (found.length === 1 && found[0]) return found[0].id;
  throw new UsageError(
    named
      ? `no endpoint ${named}`
      : `${endpoints.length} endpoints: name one with --endpoint (npm run mockpay -- endpoints lists them)`,
  );
}

function required(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`${flag} is needed`);
  return value;
}

/** `90`, `30s`, `10m`, `2h`, `1d` in seconds. */
export function seconds(text: string): number {
  const match = /^(\d{1,7})([smhd]?)$/.exec(text.trim());
  if (!match) throw new UsageError(`${text} is not a duration (90, 30s, 10m, 2h, 1d)`);
  const unit = { "": 1, s: 1, m: 60, h: 3_600, d: 86_400 }[match[2] as "" | "s" | "m" | "h" | "d"];
  return Number(match[1]) * unit;
}
