/**
 * How the SPIN model (model/checkout.pml) takes one of the code's transactions: its statements in order, and
 * for each, the model step it belongs to. A transition the code makes in more than one statement is more than
 * one step in the model when another actor can commit between them (a statement before the lock that makes
 * the rest atomic, say); statements under a lock that every other actor of the order takes are one step.
 * Declared beside the transaction; test/transaction-steps.test.ts runs it through the permutation harness's
 * gate, holds the declaration to the statements it counts, and to the model's `step <transaction>/<name>`
 * marks.
 */
export interface TransactionSteps {
  /** As the model's marks name it: `step <transaction>/<step>`. */
  transaction: string;
  /** The path whose statements are listed (their number depends on the path). */
  path: string;
  /** Every statement between BEGIN and COMMIT, in order. */
  statements: readonly StatementStep[];
}

export interface StatementStep {
  does: string;
  /** The statement's text (as sent) matches this. */
  matches: RegExp;
  /** The model step it belongs to; null: it decides nothing the model holds (a read the next statement re-checks). */
  step: string | null;
}
