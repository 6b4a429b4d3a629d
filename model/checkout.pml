/*
 * The checkout's money, as SPIN explores it: one order, its payments and refunds, every interleaving of a
 * shopper, MockPay, the event worker, the refund submitter, an operator and the timeout job. The state
 * machines' transitions come from generated.pml (scripts/model/generate.ts, from src/server/db/machines.ts):
 * this file only says who calls which, and with what guard, as the services do. docs/model.md explains it.
 *
 * Money is in units of an order's amount A (here 2, so that a partial refund exists): per payment, the
 * ledger's accounts (src/server/ledger/ledger.ts) as the code posts them.
 *
 * Goods, in units of one SKU: the order is for Q units at 1 each (so Q = A). The stock consumer deducts what
 * the order should hold, the shipping consumer ships it less the units of line refunds under way, the
 * stock-return consumer gives back what a refund's success or a return's receipt frees; line refunds name
 * units, a line refund of a shipped order is a return (its goods must come back first).
 *
 * A transition the code makes in more than one statement, with another actor able to commit between them,
 * is more than one step here: `step <transaction>/<name>` marks each, as declared beside the code
 * (test/transaction-steps.test.ts holds the declarations to the statements the permutation harness counts,
 * and to these marks).
 *
 * Defects the model must be able to find (npm run model:check -- --defect=NAME compiles one in; several
 * with commas):
 *   AUTO_REFUND_ORDER_WIDE  the stock-short refund subtracts every refund of the order (issue 24, defect 1)
 *   NO_REINSTATE            a superseded refund stays superseded when what took its room fails (defect 2)
 *   SHIP_AFTER_REFUND       the shipping consumer ships whatever the order's state (an old one)
 *   SUCCESS_UNLOCKED        a success moves its payment without the order's lock, so a cancel commits between
 *                           the payment's update and the order's (issue 40, defect 1): found as money a repair
 *                           had to give back; with REPAIRS_ALLOWED too, the repair gives it back in every run
 *   RETRY_IGNORES_SHIPMENT  a rejected line refund retried after its goods shipped pays for them (issue 40,
 *                           defect 2)
 *   SHIP_REFUNDED_UNITS     the shipping consumer ships what the order holds, though a line refund of it has
 *                           succeeded (found by the permutation harness)
 */
#include "generated.pml"

#define A 2
#define Q 2
#define NPAY 2
#define NREF 4

/* A refund someone still acts on: to be sent, at the provider, rejected and awaiting the operator, or a return
   awaiting its goods. */
#define pending(r) (refund[r] == R_REFUND_CREATED || refund[r] == R_REFUND_PROCESSING || refund[r] == R_REFUND_FAILED || refund[r] == R_REFUND_AWAITING_GOODS)
/* A payment with a refund under way. */
#define busy(r, p) (refundPay[r] == (p) && pending(r))
#define underWay(p) (busy(0, p) || busy(1, p) || busy(2, p) || busy(3, p))

mtype order = O_NONE;
mtype pay[NPAY] = P_NONE;
mtype trade[NPAY] = T_NONE;
mtype refund[NREF] = R_NONE;
byte refundPay[NREF];
byte refundAmt[NREF];
byte rejections[NREF];   /* MockPay's faults, bounded: each refund rejected at most once, */
byte failures[NREF];     /* and failed after acceptance at most once */

/* The ledger, per payment: what the provider took, what the order keeps, what is owed back, what went back. */
byte captured[NPAY];
byte rev[NPAY];
byte owed[NPAY];
byte back[NPAY];

/* Goods: what each refund's lines name, whether a return's goods came back, and the stock records. */
byte units[NREF];        /* units a refund names (0: an amount, no lines) */
bool goodsBack[NREF];    /* its goods were received back (a return) */
bool restockDone[NREF];  /* the stock-return consumer ran for it */
byte deducted;           /* stock_deduct_record */
byte restocked;          /* stock_return_record */
byte restockedUnshipped; /* of it, units that never shipped (given back for a refund without goods back, or repaired) */
byte shippedUnits;       /* shipment_line */
byte received;           /* return_receipt */
#define held (deducted - restocked)

/* The order's row lock, held across the steps of a transition that takes it before its other statements. */
bool orderLocked;
/* What the repair job did: money a payment held for an order that keeps nothing, units left behind. */
byte moneyRepairs;
byte goodsRepairs;

bool orderPaid;          /* OrderPaid raised (the stock consumer's event) */
bool stockShort;         /* StockShort raised (the automatic refund's event) */
bool shipped;
bool refundedInFullBeforeShipping;
bool shopperDone;
bool workerDone;
/* Scratch for the services below: every use is inside one atomic step, so no two processes share them. */
byte slot;
byte each;
byte pp;
byte left;
byte sumU;
bool providerDone;
bool refundsDone;
bool timeoutDone;
bool ok;

/* ---------------------------------------------------------------- the services, as the code has them */

#define otherOpen(i) (pay[1 - (i)] == P_PENDING || pay[1 - (i)] == P_SUCCESS)

/* The payment whose success is the order's: the one in SUCCESS (255: none). */
inline paying(p) {
  if
  :: pay[0] == P_SUCCESS -> p = 0
  :: pay[1] == P_SUCCESS -> p = 1
  :: else -> p = 255
  fi
}

/* recordRefund / a late payment's refund: a new refund, owed at once (revenue -> refunds_payable). */
inline recordRefund(p, amt) {
  freeSlot();
  refund_record(slot, ok);
  owe(p, amt)
}

/* A shopper's refund of one unit by its lines: refunded now before the order ships; after, a return. */
inline recordLine(p) {
  freeSlot();
  if
  :: shipped -> refund_askReturn(slot, ok)
  :: else -> refund_record(slot, ok)
  fi;
  units[slot] = 1;
  owe(p, 1)
}

inline freeSlot() {
  slot = 0;
  do
  :: slot < NREF && refund[slot] != R_NONE -> slot++
  :: slot < NREF && refund[slot] == R_NONE -> break
  :: slot == NREF -> assert(false)  /* the model's bound: never more refunds than slots */
  od
}

inline owe(p, amt) {
  refundPay[slot] = p; refundAmt[slot] = amt;
  assert(rev[p] >= amt);
  rev[p] = rev[p] - amt; owed[p] = owed[p] + amt;
  restateOnly(p)
}

/* Units of line refunds in these states, their goods not back (sumU). */
inline unitsOf(s1, s2, s3, except) {
  sumU = 0; each = 0;
  do
  :: each < NREF ->
     if
     :: each != except && !goodsBack[each] && (refund[each] == s1 || refund[each] == s2 || refund[each] == s3) -> sumU = sumU + units[each]
     :: else -> skip
     fi;
     each++
  :: else -> break
  od
}

/* What the order should hold before it ships: every unit, less lines refunds gave back; none once refunded. */
inline targetBeforeShipping(t) {
  unitsOf(R_REFUND_SUCCESS, R_REFUND_SUCCESS, R_REFUND_SUCCESS, 255);
  if :: order == O_REFUNDED -> t = 0 :: else -> t = Q - sumU fi
}

/* restateRejectedRefunds: a rejected refund that fits beside what its payment keeps is FAILED, else SUPERSEDED;
   then, for an order that keeps nothing (short of stock), what its payment still keeps with nothing under way
   is refunded anew (refundShortOrderRest). */
inline restate(p) {
  restateOnly(p);
#ifndef NO_SHORT_TOP_UP
  if
  :: order == O_STOCK_SHORT && pay[p] == P_SUCCESS && rev[p] > 0 && !underWay(p) ->
     left = rev[p]; recordRefund(p, left)
  :: else -> skip
  fi
#endif
}


inline restateOnly(p) {
  each = 0;
  do
  :: each < NREF ->
     if
     :: refundPay[each] == p && refund[each] == R_REFUND_FAILED && refundAmt[each] > rev[p] -> refund_supersede(each, ok)
#ifndef NO_REINSTATE
     :: refundPay[each] == p && refund[each] == R_REFUND_SUPERSEDED && refundAmt[each] <= rev[p] -> refund_reinstate(each, ok)
#endif
     :: else -> skip
     fi;
     each++
  :: else -> break
  od
}

/* applySuccess, in the steps its statements take (notify.ts, APPLY_SUCCESS_STEPS): the order's lock, then the
   payment (the order's payment while the order awaits one; otherwise money for a payment that cannot be the
   order's: PAID_LATE, refunded in full at once), then the order. Each fact once: a copy finds nothing to move.
   `moved` is the caller's. */
inline applySuccess(i) {
  /* step payment.succeeded/lock */
#ifndef SUCCESS_UNLOCKED
  atomic { !orderLocked -> orderLocked = true };
#endif
  /* step payment.succeeded/move */
  atomic {
    moved = false;
    if
    :: order == O_PENDING_PAYMENT && pay[i] == P_PENDING ->
       payment_succeed(i, ok); assert(captured[i] == 0); captured[i] = A; rev[i] = A; moved = true
    :: order == O_PENDING_PAYMENT && pay[i] == P_CLOSED && !otherOpen(i) ->
       payment_succeedAfterClose(i, ok); assert(captured[i] == 0); captured[i] = A; rev[i] = A; moved = true
    :: else ->
       payment_payLate(i, ok);
       if
       :: ok -> assert(captured[i] == 0); captured[i] = A; rev[i] = A; recordRefund(i, A)
       :: else -> skip
       fi
    fi
  };
  /* step payment.succeeded/pay */
  atomic {
    if
    :: moved -> order_pay(ok); if :: ok -> orderPaid = true :: else -> skip fi
    :: else -> skip
    fi;
#ifndef SUCCESS_UNLOCKED
    orderLocked = false
#endif
  }
}

inline applyClosed(i) { payment_close(i, ok) }

/* applyRefundSucceeded: the provider's word wins, from wherever it was recorded. */
inline applyRefundSucceeded(r) {
  atomic {
    pp = refundPay[r];
    if
    :: refund[r] == R_REFUND_CREATED || refund[r] == R_REFUND_PROCESSING ->
       refund_succeed(r, ok); owed[pp] = owed[pp] - refundAmt[r]; back[pp] = back[pp] + refundAmt[r]
    :: refund[r] == R_REFUND_FAILED || refund[r] == R_REFUND_SUPERSEDED ->
       assert(rev[pp] >= refundAmt[r]);
       refund_succeed(r, ok); rev[pp] = rev[pp] - refundAmt[r]; back[pp] = back[pp] + refundAmt[r]
    :: else -> skip
    fi;
    restate(pp);
    if
    :: pay[pp] == P_SUCCESS && back[pp] == captured[pp] ->
       order_refundInFull(ok);
       if :: ok && !shipped -> refundedInFullBeforeShipping = true :: else -> skip fi
    :: else -> skip
    fi
  }
}

/* ---------------------------------------------------------------- the actors */

/* A shopper: places the order, pays (maybe twice, maybe cancels), and may ask a refund. */
proctype Shopper() {
  order_place(ok);
  atomic { payment_open(0, ok); MockPay_trade_open(0, ok) };
  if
  :: atomic { trade[0] == T_WAITING -> MockPay_trade_pay(0, ok) }   /* Confirm at MockPay */
  :: skip                                                     /* walks away, or is slow */
  fi;
  if
  :: /* step order.cancel/close */
     atomic { !orderLocked && order == O_PENDING_PAYMENT -> order_close(ok); if :: trade[0] == T_WAITING -> MockPay_trade_close(0, ok); applyClosed(0) :: else -> skip fi }
  :: atomic { pay[0] == P_CLOSED && order == O_PENDING_PAYMENT && !otherOpen(0) -> payment_open(1, ok); MockPay_trade_open(1, ok) };
     if
     :: atomic { trade[1] == T_WAITING -> MockPay_trade_pay(1, ok) }
     :: skip
     fi
  :: skip
  fi;
  /* A refund of what is left to refund (the paying payment's revenue), or of one unit by its lines (a return
     once the order has shipped). */
  if
  :: atomic {
       !orderLocked;
       paying(pp);
       if
       :: pp != 255 && (order == O_PAID || order == O_SHIPPED) && rev[pp] > 0 ->
          if
          :: left = rev[pp]; recordRefund(pp, left)
          :: unitsOf(R_REFUND_CREATED, R_REFUND_PROCESSING, R_REFUND_SUCCESS, 255);
             if :: sumU < Q && rev[pp] > 1 -> recordLine(pp) :: else -> skip fi
          fi
       :: else -> skip
       fi
     }
  :: skip
  fi;
  shopperDone = true
}

/* MockPay: tells the merchant each fact of each trade, in any order, some twice, and may close a paid trade
   late (payment.closed overtaking a delayed success). */
proctype Provider() {
  byte i = 0;
  bool moved;
  do
  :: i < NPAY ->
     if
     :: trade[i] == T_PAID ->
        if :: applyClosed(i) :: skip fi;     /* a late payment.closed first */
        applySuccess(i);
        if :: applySuccess(i) :: skip fi     /* a duplicate */
     :: trade[i] == T_CLOSED -> applyClosed(i)
     :: else -> skip
     fi;
     i++
  :: i == NPAY -> break
  od;
  providerDone = true
}

/* The payment timeout: an order still unpaid once the shopper and MockPay are done is closed (its open
   trades closed at MockPay first: a Confirm racing it finds the trade closed). */
proctype Timeout() {
  (shopperDone && providerDone);
  /* step order.cancel/close */
  atomic {
    !orderLocked;
    order_close(ok);
    if :: ok && pay[0] == P_PENDING -> applyClosed(0) :: else -> skip fi;
    if :: ok && pay[1] == P_PENDING -> applyClosed(1) :: else -> skip fi;
    timeoutDone = true
  }
}

/* The event worker: OrderPaid (the stock consumer: what the order should hold is deducted, or it runs short),
   then StockDeducted (the shipping consumer), and StockShort (the automatic refund). Each its own transaction,
   under the order's lock: others act between them. */
proctype Worker() {
  byte t;
  if
  :: orderPaid
  :: shopperDone && providerDone && !orderPaid -> workerDone = true; goto done  /* nothing was paid */
  fi;
  atomic {
    !orderLocked;
    if
    :: order == O_PAID -> targetBeforeShipping(t); deducted = t
    :: order == O_PAID -> order_runShort(ok); stockShort = true
    :: else -> skip
    fi
  };
  /* step shipping/ship */
  atomic {
    !orderLocked;
#ifdef SHIP_AFTER_REFUND
    if
    :: order != O_NONE && deducted > 0 -> order_ship(ok); shipped = true; shippedUnits = held
#else
    if
    :: order == O_PAID && deducted > 0 ->
       /* what it holds and should still hold, less the units of line refunds under way */
       targetBeforeShipping(t);
#ifdef SHIP_REFUNDED_UNITS
       t = held;
#endif
       if :: held < t -> t = held :: else -> skip fi;
       unitsOf(R_REFUND_CREATED, R_REFUND_PROCESSING, R_REFUND_PROCESSING, 255);
       if :: t > sumU -> shippedUnits = t - sumU :: else -> shippedUnits = 0 fi;
       order_ship(ok); shipped = true
#endif
    :: else -> skip
    fi
  };
  if
  :: stockShort ->
     atomic {
       !orderLocked;
       paying(pp);
       if
       :: pp != 255 ->
          left = rev[pp];
#ifdef AUTO_REFUND_ORDER_WIDE
          /* what the order paid less every refund of the order, a late payment's included */
          each = 0; left = A;
          do
          :: each < NREF -> if :: refund[each] != R_NONE && refund[each] != R_REFUND_FAILED && refund[each] != R_REFUND_SUPERSEDED && left >= refundAmt[each] -> left = left - refundAmt[each] :: else -> skip fi; each++
          :: else -> break
          od;
#endif
          if :: left > 0 -> recordRefund(pp, left) :: else -> skip fi
       :: else -> skip
       fi
     }
  :: else -> skip
  fi;
  workerDone = true;
done:
  skip
}

/* Refunds of a payment someone still acts on (the provider, a return's goods, the operator). */
#define actedOn(r, p) (refundPay[r] == (p) && (refund[r] == R_REFUND_CREATED || refund[r] == R_REFUND_PROCESSING || refund[r] == R_REFUND_FAILED || refund[r] == R_REFUND_AWAITING_GOODS))
#define anyActedOn(p) (actedOn(0, p) || actedOn(1, p) || actedOn(2, p) || actedOn(3, p))
#define lineUnderWay(r) (units[r] > 0 && (refund[r] == R_REFUND_CREATED || refund[r] == R_REFUND_PROCESSING))
/* What the repair job finds: a payment that succeeded for an order that keeps nothing, still holding money with
   no refund of it acted on; units deducted that never shipped, with no line refund under way to give them back. */
#define keepsNothing (order == O_CLOSED || order == O_STOCK_SHORT || order == O_REFUNDED)
#define holdsMoney(p) (pay[p] == P_SUCCESS && rev[p] > 0 && !anyActedOn(p))
#define moneyRepairable (keepsNothing && (holdsMoney(0) || holdsMoney(1)))
/* Units deducted that never shipped and are still held (deducted, less shipped, less given back unshipped). */
#define neverShippedHeld (deducted - shippedUnits - restockedUnshipped)
#define goodsRepairable (shipped && neverShippedHeld > 0 \
                         && !lineUnderWay(0) && !lineUnderWay(1) && !lineUnderWay(2) && !lineUnderWay(3))

/* The refund submitter, MockPay's refund API, a return's goods, and an operator's Retry, until every refund is
   decided. The caller's guard waits for the order's lock to be free. */
inline actOn(r) {
  atomic {
    pp = refundPay[r];
    if
    :: refund[r] == R_REFUND_CREATED && rejections[r] == 0 ->   /* rejected ("risk control") */
       rejections[r]++; refund_reject(r, ok); owed[pp] = owed[pp] - refundAmt[r]; rev[pp] = rev[pp] + refundAmt[r]; restate(pp)
    :: refund[r] == R_REFUND_CREATED -> refund_accept(r, ok)
    :: refund[r] == R_REFUND_PROCESSING && failures[r] == 0 ->  /* accepted, then failed */
       failures[r]++; refund_failAfterAcceptance(r, ok); owed[pp] = owed[pp] - refundAmt[r]; rev[pp] = rev[pp] + refundAmt[r]; restate(pp)
    :: refund[r] == R_REFUND_PROCESSING -> applyRefundSucceeded(r)
    :: refund[r] == R_REFUND_AWAITING_GOODS ->                  /* the goods come back, or never do */
       if
       :: received = received + units[r]; goodsBack[r] = true; refund_receive(r, ok)
       :: refund_cancelReturn(r, ok); owed[pp] = owed[pp] - refundAmt[r]; rev[pp] = rev[pp] + refundAmt[r]; restate(pp)
       fi
    :: refund[r] == R_REFUND_FAILED ->                          /* the operator's Retry */
       if
       :: refundAmt[r] <= rev[pp] ->
          /* lines whose goods shipped meanwhile: more than the shipment left behind beside the other refunds
             that pay for units never shipped */
          unitsOf(R_REFUND_CREATED, R_REFUND_PROCESSING, R_REFUND_SUCCESS, r);
#ifdef RETRY_IGNORES_SHIPMENT
          refund_retry(r, ok);
#else
          if
          :: units[r] > 0 && !goodsBack[r] && shipped && units[r] + sumU > Q - shippedUnits -> refund_retryAsReturn(r, ok)
          :: else -> refund_retry(r, ok)
          fi;
#endif
          rev[pp] = rev[pp] - refundAmt[r]; owed[pp] = owed[pp] + refundAmt[r]; restate(pp)
       :: else -> refund_supersede(r, ok)
       fi
    fi
  }
}

proctype Refunds() {
  do
  :: atomic { !orderLocked && pending(0) -> actOn(0) }
  :: atomic { !orderLocked && pending(1) -> actOn(1) }
  :: atomic { !orderLocked && pending(2) -> actOn(2) }
  :: atomic { !orderLocked && pending(3) -> actOn(3) }
  :: atomic { (!pending(0) && !pending(1) && !pending(2) && !pending(3) && shopperDone && providerDone && workerDone &&
               !moneyRepairable && !goodsRepairable) -> refundsDone = true; break }
  od
}

/* The stock-return consumer, once per refund that succeeded or whose goods came back: what the order holds
   beyond what it should is given back; once it has shipped, only the refund's own goods (received back, or the
   units a line refund paid for, left behind by the shipment). */
inline restock(r) {
  if
  :: shipped ->
     if
     :: goodsBack[r] || refund[r] == R_REFUND_SUCCESS -> left = units[r]
     :: else -> left = 0
     fi;
     if
     :: held <= shippedUnits - received -> left = 0
     :: held > shippedUnits - received && held - (shippedUnits - received) < left -> left = held - (shippedUnits - received)
     :: else -> skip
     fi
  :: else ->
     targetBeforeShipping(left);
     if :: held > left -> left = held - left :: else -> left = 0 fi
  fi;
  restocked = restocked + left;
  if :: !goodsBack[r] -> restockedUnshipped = restockedUnshipped + left :: else -> skip fi;
  restockDone[r] = true
}

#define restocked(r) (restockDone[r] || !(refund[r] == R_REFUND_SUCCESS || goodsBack[r]))
proctype StockReturn() {
  do
  :: atomic { !orderLocked && !restockDone[0] && (refund[0] == R_REFUND_SUCCESS || goodsBack[0]) -> restock(0) }
  :: atomic { !orderLocked && !restockDone[1] && (refund[1] == R_REFUND_SUCCESS || goodsBack[1]) -> restock(1) }
  :: atomic { !orderLocked && !restockDone[2] && (refund[2] == R_REFUND_SUCCESS || goodsBack[2]) -> restock(2) }
  :: atomic { !orderLocked && !restockDone[3] && (refund[3] == R_REFUND_SUCCESS || goodsBack[3]) -> restock(3) }
  :: atomic { (refundsDone && restocked(0) && restocked(1) && restocked(2) && restocked(3)) -> break }
  od
}

/* The repair job (src/server/reconciliation/repair.ts), once the order has settled (the code waits its lag:
   here, everyone else is done and no refund is under way). It stops once the refunds are all decided: they wait
   for it to have nothing left to repair. (A repair racing the flows it backs up is the permutation harness's
   pair, statement by statement.) */
#define settled (shopperDone && providerDone && workerDone && timeoutDone && !pending(0) && !pending(1) && !pending(2) && !pending(3))
proctype Repair() {
  do
  :: atomic {
       !orderLocked && settled && moneyRepairable ->
       if :: holdsMoney(0) -> pp = 0 :: else -> pp = 1 fi;
       moneyRepairs++;
       if :: order == O_CLOSED -> payment_repairLate(pp, ok) :: else -> skip fi;
       left = rev[pp]; recordRefund(pp, left)
     }
  :: atomic {
       !orderLocked && settled && goodsRepairable ->
       goodsRepairs++;
       left = neverShippedHeld;
       restocked = restocked + left;
       restockedUnshipped = restockedUnshipped + left
     }
  :: atomic { refundsDone -> break }
  od
}

/* What must hold in every state, between any two steps of anyone: each payment's ledger adds up, no refund
   marked superseded would still fit (no refund awaits nobody while it could be paid), and no more goods come
   back than left. */
#define roomy(r) (refund[r] == R_REFUND_SUPERSEDED && refundAmt[r] <= rev[refundPay[r]])
#define balanced(i) (rev[i] + owed[i] + back[i] == captured[i])
active proctype Always() {
end:
  atomic { (roomy(0) || roomy(1) || roomy(2) || roomy(3) || !balanced(0) || !balanced(1) ||
            restocked > deducted || received > shippedUnits) -> assert(false) }
}

/* What must hold once everyone is done (every interleaving, every fault). */
init {
  atomic { run Shopper(); run Provider(); run Timeout(); run Worker(); run Refunds(); run StockReturn(); run Repair() };
  (_nr_pr == 2);  /* everyone but init and Always has finished */
  byte p; byte kept; byte i;
  paying(p);
  /* Money conserved per order: captured - refunded = the price of what the order keeps (nothing for one
     that ships nothing), and never negative. */
  kept = 0;
  if :: p != 255 && (order == O_PAID || order == O_SHIPPED) -> kept = captured[p] - back[p] :: else -> skip fi;
  assert(captured[0] + captured[1] - back[0] - back[1] == kept);
  /* The ledger agrees with itself: each payment's accounts add up, nothing owed once settled. */
  for (i : 0 .. NPAY - 1) {
    assert(rev[i] + owed[i] + back[i] == captured[i]);
    assert(owed[i] == 0)
  }
  /* No refund awaiting nobody: a superseded refund really has no room. */
  for (i : 0 .. NREF - 1) {
    assert(refund[i] != R_REFUND_SUPERSEDED || refundAmt[i] > rev[refundPay[i]])
  }
  /* Goods conserved: stock deducted - stock returned = units shipped and not received back (nothing held
     for the order once it has settled); a refund pays only for units that never shipped or came back. */
  if
  :: shipped -> assert(held == shippedUnits - received)
  :: else -> assert(held == 0)
  fi;
  unitsOf(R_REFUND_SUCCESS, R_REFUND_SUCCESS, R_REFUND_SUCCESS, 255);
  if
  :: shipped -> assert(sumU <= Q - shippedUnits)
  :: else -> skip
  fi;
  /* The code never needs the repair's money: it is there for what went wrong anyway. */
#ifndef REPAIRS_ALLOWED
  assert(moneyRepairs == 0);
#endif
  /* No order left unpaid forever; nothing shipped for an order refunded in full before it shipped. */
  assert(order != O_PENDING_PAYMENT);
  assert(!(shipped && refundedInFullBeforeShipping))
}

/* No order is left awaiting payment forever (nor never placed): every run ends with the order decided, and it
   stays so. (Every loop here makes progress and every process ends, so no fairness is needed: an unfair
   scheduler has nothing to spin on.) */
ltl order_decided { <> [] (order != O_NONE && order != O_PENDING_PAYMENT) }
