import type { NotificationOutcome } from "~/server/db/schema";

/** What the merchant made of one fact from the provider: recorded, counted, and answered to the provider. */
export interface Verdict {
  outcome: NotificationOutcome;
  httpStatus: number;
  detail: string;
  alert?: boolean;
}

/** A fact taken (or recognised as already taken): 200 tells the provider to stop sending it. */
export const ok = (outcome: NotificationOutcome, detail: string, alert = false): Verdict => ({
  outcome,
  httpStatus: 200,
  detail,
  alert,
});

/** A fact refused: any other status tells the provider to send it again (or give up, for a forgery). */
export const refuse = (
  outcome: NotificationOutcome,
  httpStatus: number,
  detail: string,
  alert = false,
): Verdict => ({ outcome, httpStatus, detail, alert });
