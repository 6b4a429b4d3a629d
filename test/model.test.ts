import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { MACHINES } from "~/server/db/machines";
import { checkModel } from "../scripts/model/check";
import { generateModel, MODEL_MACHINES } from "../scripts/model/generate";

/**
 * The SPIN model (model/checkout.pml, its machines generated from src/server/db/machines.ts) passes as the code
 * is, and each known defect compiled into it is found, with a counterexample told step by step. SPIN and gcc
 * come from Debian (`apt-get install -y spin gcc`; .ci/run installs them); without them this file is skipped,
 * and CI's own `npm run model:check` step fails instead.
 */
const hasSpin = (() => {
  try {
    execFileSync("spin", ["-V"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

describe("the model's machines come from the code's tables", () => {
  it("has an inline for every transition and deletion of every machine, and nothing else", () => {
    const model = generateModel();
    const inlines = [...model.matchAll(/^inline (\w+)\(/gm)].map((m) => m[1]);
    const transitions = MODEL_MACHINES.flatMap((machine) =>
      [...Object.keys(machine.transitions), ...Object.keys(machine.deletions ?? {})].map(
        (name) => `${machine.name.replace(/[^A-Za-z0-9]+/g, "_")}_${name}`,
      ),
    );
    expect(model).toContain("inline idempotency_record_release(ok) {");
    expect(inlines.sort()).toEqual(transitions.sort());
  });

  it("a transition removed from a table is gone from the model too", () => {
    const [order, ...rest] = MACHINES;
    const { ship: _removed, ...kept } = order.transitions;
    const model = generateModel([{ ...order, transitions: kept } as typeof order, ...rest]);
    expect(model).not.toContain("inline order_ship(");
    expect(model).toContain("inline order_pay(");
  });

  it.skipIf(!hasSpin)("and the model that used it no longer compiles", () => {
    const [order, ...rest] = MACHINES;
    const { ship: _removed, ...kept } = order.transitions;
    const others = MODEL_MACHINES.filter((machine) => machine !== order);
    const machines = [{ ...order, transitions: kept } as typeof order, ...others];
    expect(rest.every((machine) => others.includes(machine))).toBe(true);
    // SPIN refuses the model: the shipping consumer calls a transition the tables no longer have.
    expect(() => checkModel({ machines })).toThrow(/order_ship/);
  });
});

describe.skipIf(!hasSpin)("SPIN over every interleaving", () => {
  it("finds no violation in the model as the code is, nor an order left unpaid forever", {
    timeout: 240_000,
  }, () => {
    const result = checkModel();
    expect(result.violation).toBeUndefined();
    expect(result.ok).toBe(true);
    expect(result.searches.map((s) => [s.property, s.ok])).toEqual([
      ["safety", true],
      ["order_decided", true],
    ]);
    expect(result.statesStored).toBeGreaterThan(100_000);
    for (const search of result.searches) {
      console.log(
        `[model] checkout, ${search.property}: ${search.statesStored} states stored, depth ${search.depth}, ${search.memoryMb} MB, ${search.seconds.toFixed(1)} s`,
      );
    }
  });

  it("a success that moves its payment without the order's lock needs the repair, and the repair makes every run whole", {
    timeout: 240_000,
  }, () => {
    const result = checkModel({ defect: "SUCCESS_UNLOCKED,REPAIRS_ALLOWED", ltl: false });
    expect(result.violation).toBeUndefined();
    expect(result.ok).toBe(true);
  });

  it.each([
    // Money left with an order that keeps nothing: the repair had to give it back.
    ["AUTO_REFUND_ORDER_WIDE", "moneyRepairs", "the order → STOCK_SHORT"],
    ["NO_REINSTATE", "assertion violated 0", "REFUND_SUPERSEDED"],
    ["SHIP_AFTER_REFUND", "shipped", "the goods are shipped"],
    ["NO_SHORT_TOP_UP", "moneyRepairs", "the order → STOCK_SHORT"],
    // The success's payment moved, the cancel closed the order, the success's order update changed nothing.
    ["SUCCESS_UNLOCKED", "moneyRepairs", "the order → CLOSED"],
    // A refund pays for units the shipment took: more than never shipped.
    ["RETRY_IGNORES_SHIPMENT", "sumU<=(2-shippedUnits)", "the goods are shipped"],
    ["SHIP_REFUNDED_UNITS", "sumU<=(2-shippedUnits)", "the goods are shipped"],
  ])("finds defect %s, with a trail that tells it", { timeout: 180_000 }, (defect, violated, step) => {
    const result = checkModel({ defect });
    expect(result.ok).toBe(false);
    expect(result.violation).toContain(violated);
    expect(result.story.some((line) => line.includes(step))).toBe(true);
    expect(result.story[0]).toContain("the order → PENDING_PAYMENT");
  });
});

describe.skipIf(!hasSpin)("SPIN over the idempotency core's leases and a redelivering queue", () => {
  it("finds no violation, for safety and for each liveness property", { timeout: 180_000 }, () => {
    const result = checkModel({ model: "idempotency" });
    expect(result.violation).toBeUndefined();
    expect(result.searches.map((s) => [s.property, s.ok])).toEqual([
      ["safety", true],
      ["everyone_answered", true],
      ["key_decided", true],
      ["event_applied", true],
    ]);
    expect(result.statesStored).toBeGreaterThan(10_000);
  });

  it.each([
    // A holder whose lease was taken over commits anyway: the takeover, then the stale holder's write.
    ["NO_FENCING", "assertion violated (version==mine)", "the key's business writes commit", "takes a lease"],
    // A dead holder's key never taken over: its duplicates are told "in progress" forever.
    ["NO_TAKEOVER", "acceptance cycle", "dies holding the key", "repeats forever"],
    // Two deliveries both see the event unconsumed: two effects.
    [
      "CONSUME_CHECK_THEN_INSERT",
      "assertion violated (consumerEffects==1)",
      "the consumer's effect is applied",
      "the consume record 0 → PROCESSING",
    ],
  ])(
    "finds defect %s, with a trail that tells it",
    { timeout: 180_000 },
    (defect, violated, last, earlier) => {
      const result = checkModel({ model: "idempotency", defect });
      expect(result.ok).toBe(false);
      expect(result.violation).toContain(violated);
      expect(result.story.some((line) => line.includes(earlier))).toBe(true);
      expect(result.story.some((line) => line.includes(last))).toBe(true);
    },
  );
});
