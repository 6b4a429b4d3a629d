import { describe, expect, it } from "vitest";
import { STATUS_TEXTS, statusText } from "~/client/status-labels";
import { IDEMPOTENCY_STATUSES } from "~/server/db/schema/infrastructure";
import {
  NOTIFICATION_OUTCOMES,
  ORDER_STATUSES,
  PAYMENT_STATUSES,
  REFUND_STATUSES,
} from "~/server/db/schema/merchant";

describe("every status the schema allows has words for a person", () => {
  const cases = [
    ["order", ORDER_STATUSES],
    ["payment", PAYMENT_STATUSES],
    ["refund", REFUND_STATUSES],
    ["record", IDEMPOTENCY_STATUSES],
    ["notification", NOTIFICATION_OUTCOMES],
  ] as const;
  for (const [kind, statuses] of cases) {
    it(`${kind}: a label and what happens next, for each of ${statuses.length}`, () => {
      for (const status of statuses) {
        const text = STATUS_TEXTS[kind][status];
        expect(text?.label, `${kind} ${status}`).toBeTruthy();
        expect(text?.label).not.toBe(status);
        expect(text?.next, `${kind} ${status}`).toBeTruthy();
      }
      // And nothing labelled that the schema no longer has.
      expect(Object.keys(STATUS_TEXTS[kind]).sort()).toEqual([...statuses].sort());
    });
  }

  it("an unknown status reads as itself instead of breaking the page", () => {
    expect(statusText("order", "SOMETHING_NEW")).toMatchObject({ label: "SOMETHING_NEW" });
  });
});
