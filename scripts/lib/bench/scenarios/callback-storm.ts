import { randomUUID } from "node:crypto";
import { createOrder } from "~/server/orders/create-order";
import { createPayment } from "~/server/payments/create-payment";
import { signBody } from "~/shared/provider-contract";
import type { Bench } from "../bench";
import { latencyCurveOf, peakRssMb } from "../load";
import { log, PAID, SECRET } from "../settings";

/** 5: paid orders × 10 concurrent signed notifications: one transition and one event each. */
export async function callbackStorm(bench: Bench) {
  const { db, app, userId, count, meter, rows } = bench;
  log(`8. callback storm: ${PAID} orders × 10 concurrent signed notifications`);
  const payments: Awaited<ReturnType<typeof createPayment>>[] = [];
  for (let i = 0; i < PAID; i++) {
    const order = await createOrder(db, userId, {
      requestId: randomUUID(),
      items: [{ skuId: "SKU-MUG", quantity: 1 }],
    });
    const payment = await createPayment(
      db,
      userId,
      { orderId: order.orderId },
      {
        appId: "app_checkout_demo",
        webhookSecret: SECRET,
        baseUrl: app.baseUrl,
        paymentTimeoutS: 900,
      },
    );
    payments.push(payment);
  }
  const cbStart = Date.now();
  const cbLatencies: number[] = [];
  let cbFailures = 0;
  const callbackCpu = meter();
  await callbackCpu.measure(
    () =>
      Promise.all(
        payments.map(async (p, i) => {
          const body = JSON.stringify({
            id: `evt_bench_${i}`,
            type: "payment.succeeded",
            app_id: "app_checkout_demo",
            out_trade_no: p.outTradeNo,
            transaction_id: `T_BENCH_${i}`,
            amount_cents: p.amountCents,
            currency: p.currency,
            created_at: new Date().toISOString(),
          });
          await Promise.all(
            Array.from({ length: 10 }, async () => {
              const t0 = performance.now();
              const res = await fetch(`${app.baseUrl}/api/payments/notify`, {
                method: "POST",
                headers: {
                  "content-type": "application/json",
                  "provider-signature": signBody("notification", SECRET, body, Math.floor(Date.now() / 1000)),
                },
                body,
              });
              await res.text();
              cbLatencies.push(performance.now() - t0);
              if (res.status !== 200) cbFailures++;
            }),
          );
        }),
      ),
    () => PAID * 10,
  );
  const cbSeconds = (Date.now() - cbStart) / 1000;
  cbLatencies.sort((a, b) => a - b);
  const transitions = await count(
    `SELECT count(*)::int AS n FROM payment_order WHERE status = 'SUCCESS' AND out_trade_no IN (${payments.map((p) => `'${p.outTradeNo}'`).join(",")})`,
  );
  const events = await count(`SELECT count(*)::int AS n FROM outbox_event WHERE event_type = 'OrderPaid'`);
  rows.push({
    id: "callback-storm",
    scenario: `8 callback storm (${PAID}×10)`,
    requestsPerSec: Math.round((PAID * 10) / cbSeconds),
    ...callbackCpu.perRequest(),
    p50Ms: Math.round(cbLatencies[Math.floor(cbLatencies.length * 0.5)] ?? 0),
    p99Ms: Math.round(cbLatencies[Math.floor(cbLatencies.length * 0.99)] ?? 0),
    latency: latencyCurveOf(cbLatencies),
    peakRssMb: peakRssMb(app.child),
    correctness: `${transitions} transitions, ${events} events, ${cbFailures} non-200`,
    ok: transitions === PAID && events === PAID && cbFailures === 0,
  });
}
