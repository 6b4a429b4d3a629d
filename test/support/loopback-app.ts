import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { processCloseRequest } from "~/mockpay/server/closes";
import type { MockPayContext } from "~/mockpay/server/context";
import { answerStatusQuery } from "~/mockpay/server/query-api";
import { processRefundRequest } from "~/mockpay/server/refunds";
import type { AppContext } from "~/server/app-context";
import { handlePaymentNotification, rawNotification } from "~/server/payments/notification-receive";
import { CLOSE_PATH } from "~/shared/provider-contract";
import { testMockPay } from "./app-context";

export interface LoopbackApp {
  baseUrl: string;
  /** The app context with every URL pointing at this server. */
  app: AppContext;
  /** MockPay's context (its APIs are served here too). */
  mockPay: MockPayContext;
  close(): Promise<void>;
}

/**
 * The HTTP surfaces that merchant and provider use to talk to each other, served
 * by the real services on a loopback port: notifications, refunds, closes, status query.
 * Lighter than `next start` for tests that only need the conversation.
 */
export async function startLoopbackApp(
  base: AppContext,
  mockPay: MockPayContext = testMockPay(base.db),
): Promise<LoopbackApp> {
  let app = base;
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", async () => {
      const url = new URL(req.url ?? "/", "http://loopback");
      const signature = req.headers["provider-signature"] ? String(req.headers["provider-signature"]) : null;
      const send = (status: number, text: string, sig: string | null = null) => {
        res.writeHead(status, {
          "content-type": "application/json",
          ...(sig ? { "provider-signature": sig } : {}),
        });
        res.end(text);
      };
      try {
        if (req.method === "POST" && url.pathname === "/api/payments/notify") {
          const header = (name: string) => {
            const value = req.headers[name];
            return value === undefined ? null : String(value);
          };
          const answer = await handlePaymentNotification(app.db, rawNotification(body, header), app.payments);
          return send(answer.httpStatus, JSON.stringify(answer.body));
        }
        if (req.method === "POST" && url.pathname === CLOSE_PATH) {
          const answer = await processCloseRequest(mockPay.db, { body, signature }, mockPay.webhookSecret);
          return send(answer.status, answer.body, answer.signature);
        }
        if (req.method === "POST" && url.pathname === "/provider/api/refunds") {
          const answer = await processRefundRequest(mockPay.db, { body, signature }, mockPay.webhookSecret);
          return send(answer.status, answer.body, answer.signature);
        }
        if (req.method === "GET" && url.pathname.startsWith("/provider/api/trades/")) {
          const answer = await answerStatusQuery(
            mockPay.db,
            {
              appId: url.searchParams.get("app_id") ?? "",
              outTradeNo: decodeURIComponent(url.pathname.split("/").pop() ?? ""),
              signature,
            },
            mockPay.webhookSecret,
          );
          return send(answer.status, answer.body, answer.signature);
        }
        send(404, "{}");
      } catch (error) {
        send(500, JSON.stringify({ message: String(error) }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  app = { ...base, payments: { ...base.payments, baseUrl, providerBaseUrl: baseUrl } };
  return {
    baseUrl,
    app,
    mockPay,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
