import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { MACHINES } from "~/server/db/machines";
import { checkModel } from "../scripts/model/check";
import { generateModel } from "../scripts/model/generate";

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
  it("has an inline for every transition of every machine, and nothing else", () => {
    const model = generateModel();
    const inlines = [...model.matchAll(/^inline (\w+)\(/gm)].map((m) => m[1]);
    const transitions = MACHINES.flatMap((machine) =>
      Object.keys(machine.transitions).map(
        (name) => `${machine.name.replace(/[^A-Za-z0-9]+/g, "_")}_${name}`,
      ),
    );
    expect(inlines.sort()).toEqual(transitions.sort());
  });

  it("a transition removed from a table is gone from the model too", () => {
    const [order, ...rest] = MACHINES;
    const { ship: _removed, ...kept } = order.transitions;
    const model = generateModel([{ ...order, transitions: kept } as typeof order, ...rest]);
    expect(model).not.toContain("inline order_ship(");
    expect(model).toContain("inline order_pay(");
  });
});

describe.skipIf(!hasSpin)("SPIN over every interleaving", () => {
  it("finds no violation in the model as the code is", { timeout: 180_000 }, () => {
    const result = checkModel();
    expect(result.violation).toBeUndefined();
    expect(result.ok).toBe(true);
    expect(result.statesStored).toBeGreaterThan(100_000);
  });

  it.each([
    ["AUTO_REFUND_ORDER_WIDE", "captured", "the order → STOCK_SHORT"],
    ["NO_REINSTATE", "assertion violated 0", "REFUND_SUPERSEDED"],
    ["SHIP_AFTER_REFUND", "shipped", "the goods are shipped"],
    ["NO_SHORT_TOP_UP", "captured", "the order → STOCK_SHORT"],
  ])("finds defect %s, with a trail that tells it", { timeout: 180_000 }, (defect, violated, step) => {
    const result = checkModel({ defect });
    expect(result.ok).toBe(false);
    expect(result.violation).toContain(violated);
    expect(result.story.some((line) => line.includes(step))).toBe(true);
    expect(result.story[0]).toContain("the order → PENDING_PAYMENT");
  });
});
