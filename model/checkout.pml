/*
 * The checkout's money, as SPIN explores it: one order, its payments and refunds, every interleaving of a
 * shopper, MockPay, the event worker, the refund submitter, an operator and the timeout job. The state
 * machines' transitions come from generated.pml (scripts/model/generate.ts, from src/server/db/machines.ts):
 * this file only says who calls which, and with what guard, as the services do. docs/model.md explains it.
 *
 * Money is in units of an order's amount A (here 2, so that a partial refund exists): per payment, the
 * ledger's accounts (src/server/ledger/ledger.ts) as the code posts them.
 *
 * Defects the model must be able to find (npm run model:check -- --defect=NAME compiles one in):
 *   AUTO_REFUND_ORDER_WIDE  the stock-short refund subtracts every refund of the order (issue 24, defect 1)
 *   NO_REINSTATE            a superseded refund stays superseded when what took its room fails (defect 2)
 *   SHIP_AFTER_REFUND       the shipping consumer ships whatever the order's state (an old one)
 */
#include "generated.pml"

#define A 2
#define NPAY 2
#define NREF 4

/* A refund someone still acts on: to be sent, at the provider, or rejected and awaiting the operator. */
#define pending(r) (refund[r] == R_REFUND_CREATED || refund[r] == R_REFUND_PROCESSING || refund[r] == R_REFUND_FAILED)
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
bool providerDone;
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
  slot = 0;
  do
  :: slot < NREF && refund[slot] != R_NONE -> slot++
  :: slot < NREF && refund[slot] == R_NONE -> break
  :: slot == NREF -> assert(false)  /* the model's bound: never more refunds than slots */
  od;
  refund_record(slot, ok);
  refundPay[slot] = p; refundAmt[slot] = amt;
  assert(rev[p] >= amt);
  rev[p] = rev[p] - amt; owed[p] = owed[p] + amt;
  restateOnly(p)
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

/* applySuccess: the order's payment while it awaits one; otherwise money for a payment that cannot be the
   order's: PAID_LATE, refunded in full at once. Each fact once: a copy finds nothing to move. */
inline applySuccess(i) {
  atomic {
    if
    :: order == O_PENDING_PAYMENT && pay[i] == P_PENDING ->
       payment_succeed(i, ok); assert(captured[i] == 0); captured[i] = A; rev[i] = A;
       order_pay(ok); orderPaid = true
    :: order == O_PENDING_PAYMENT && pay[i] == P_CLOSED && !otherOpen(i) ->
       payment_succeedAfterClose(i, ok); assert(captured[i] == 0); captured[i] = A; rev[i] = A;
       order_pay(ok); orderPaid = true
    :: else ->
       payment_payLate(i, ok);
       if
       :: ok -> assert(captured[i] == 0); captured[i] = A; rev[i] = A; recordRefund(i, A)
       :: else -> skip
       fi
    fi
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
  :: atomic { order == O_PENDING_PAYMENT -> order_close(ok); if :: trade[0] == T_WAITING -> MockPay_trade_close(0, ok); applyClosed(0) :: else -> skip fi }
  :: atomic { pay[0] == P_CLOSED && order == O_PENDING_PAYMENT && !otherOpen(0) -> payment_open(1, ok); MockPay_trade_open(1, ok) };
     if
     :: atomic { trade[1] == T_WAITING -> MockPay_trade_pay(1, ok) }
     :: skip
     fi
  :: skip
  fi;
  /* A refund of part or all, of what is left to refund (the paying payment's revenue). */
  if
  :: atomic {
       paying(pp);
       if
       :: pp != 255 && (order == O_PAID || order == O_SHIPPED) && rev[pp] > 0 ->
          if :: left = rev[pp]; recordRefund(pp, left) :: rev[pp] > 1 -> recordRefund(pp, 1) fi
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
  atomic {
    order_close(ok);
    if :: ok && pay[0] == P_PENDING -> applyClosed(0) :: else -> skip fi;
    if :: ok && pay[1] == P_PENDING -> applyClosed(1) :: else -> skip fi
  }
}

/* The event worker: OrderPaid (stock, then shipping, or short of stock) and StockShort (the automatic refund). */
proctype Worker() {
  if
  :: orderPaid
  :: shopperDone && providerDone && !orderPaid -> workerDone = true; goto done  /* nothing was paid */
  fi;
  atomic {
#ifdef SHIP_AFTER_REFUND
    if
    :: order != O_NONE -> order_ship(ok); shipped = true
#else
    if
    :: order == O_PAID -> order_ship(ok); shipped = true
#endif
    :: order == O_PAID -> order_runShort(ok); stockShort = true
    :: else -> skip
    fi
  };
  if
  :: stockShort ->
     atomic {
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

/* The refund submitter, MockPay's refund API and an operator's Retry, until every refund is decided. */
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
    :: refund[r] == R_REFUND_FAILED ->                          /* the operator's Retry */
       if
       :: refundAmt[r] <= rev[pp] -> refund_retry(r, ok); rev[pp] = rev[pp] - refundAmt[r]; owed[pp] = owed[pp] + refundAmt[r]; restate(pp)
       :: else -> refund_supersede(r, ok)
       fi
    fi
  }
}

proctype Refunds() {
  do
  :: atomic { pending(0) -> actOn(0) }
  :: atomic { pending(1) -> actOn(1) }
  :: atomic { pending(2) -> actOn(2) }
  :: atomic { pending(3) -> actOn(3) }
  :: atomic { !pending(0) && !pending(1) && !pending(2) && !pending(3) && shopperDone && providerDone && workerDone -> break }
  od
}

/* What must hold in every state, between any two steps of anyone: each payment's ledger adds up, and no
   refund marked superseded would still fit (no refund awaits nobody while it could be paid). */
#define roomy(r) (refund[r] == R_REFUND_SUPERSEDED && refundAmt[r] <= rev[refundPay[r]])
#define balanced(i) (rev[i] + owed[i] + back[i] == captured[i])
active proctype Always() {
end:
  atomic { (roomy(0) || roomy(1) || roomy(2) || roomy(3) || !balanced(0) || !balanced(1)) -> assert(false) }
}

/* What must hold once everyone is done (every interleaving, every fault). */
init {
  atomic { run Shopper(); run Provider(); run Timeout(); run Worker(); run Refunds() };
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
  /* No order left unpaid forever; nothing shipped for an order refunded in full before it shipped. */
  assert(order != O_PENDING_PAYMENT);
  assert(!(shipped && refundedInFullBeforeShipping))
}

/* No order is left awaiting payment forever (nor never placed): every run ends with the order decided, and it
   stays so. (Every loop here makes progress and every process ends, so no fairness is needed: an unfair
   scheduler has nothing to spin on.) */
ltl order_decided { <> [] (order != O_NONE && order != O_PENDING_PAYMENT) }
